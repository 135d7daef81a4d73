"""`torch.nn.init` for host tensors (a module's parameters before they are registered):
each fills the tensor in place with host values, as PyTorch's does."""
import torch


def _fill(tensor, draw):
    if tensor._js is not None:
        raise TypeError("torch.nn.init fills host tensors (torch.empty(...)), not a traced tensor")
    shape, dt, _ = tensor._host
    tensor._host = (shape, dt, [draw() for _ in range(shape.numel())])
    return tensor


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    return _fill(tensor, lambda: torch._rng.uniform(a, b))


def zeros_(tensor):
    return _fill(tensor, lambda: 0.0)


def ones_(tensor):
    return _fill(tensor, lambda: 1.0)
