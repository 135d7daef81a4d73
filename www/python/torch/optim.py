"""`torch.optim`: a wrapper given a torch optimizer uses PopTorch's of the same name (as
PopTorch converts it), so these are poptorch.optim's."""


def __getattr__(name):
    import poptorch

    if name in ("SGD", "Adam", "AdamW", "RMSprop"):
        return getattr(poptorch.optim, name)
    raise AttributeError(f"module 'torch.optim' has no attribute '{name}'")
