"""`torch.nn.functional`: each function is one of the package's Tensor methods."""


def relu(x, inplace=False):
    return x.relu()


def gelu(x, approximate="none"):
    if approximate != "none":
        raise ValueError(f"gelu: approximate={approximate!r} is not in this engine (its GELU is the exact erf form)")
    return x.gelu()


def sigmoid(x):
    return x.sigmoid()


def tanh(x):
    return x.tanh()


def softmax(x, dim=-1, **_):
    return x.softmax(dim)


def log_softmax(x, dim=-1, **_):
    return x.log_softmax(dim)


def linear(x, weight, bias=None):
    return x._op("linear", weight, bias)


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    return x._op("layerNorm", shape, weight, bias, eps)


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return x._op("conv2d", weight, bias, _opts(stride=stride, padding=padding, dilation=dilation, groups=groups))


def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    if reduction != "mean" or weight is not None:
        raise ValueError("cross_entropy: this engine has the mean reduction without class weights (weight=None, reduction='mean')")
    opts = {}
    if ignore_index != -100:
        opts["ignoreIndex"] = ignore_index
    if label_smoothing:
        opts["labelSmoothing"] = label_smoothing
    return input.cross_entropy(target, None, opts) if opts else input.cross_entropy(target)


def nll_loss(input, target, **kw):
    raise NotImplementedError("nll_loss: use cross_entropy on the logits (this engine fuses log_softmax into it)")


def mse_loss(input, target, reduction="mean"):
    # As PopTorch lowers it: the squared error reduced by an identity loss (so the wrapper
    # finds it as the model's loss).
    d = input - target
    return _identity_loss(d * d, reduction)


def l1_loss(input, target, reduction="mean"):
    d = input - target
    # |d| as relu(d) + relu(-d): no sqrt, whose gradient at 0 is not a number
    return _identity_loss(d.relu() + (-d).relu(), reduction)


def _identity_loss(x, reduction):
    import poptorch

    return poptorch.identity_loss(x, reduction)


def one_hot(x, num_classes=-1):
    if num_classes < 1:
        raise ValueError("one_hot: give num_classes (the engine's shapes are static)")
    return x.one_hot(num_classes)


def max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    if return_indices:
        raise ValueError("max_pool2d: return_indices is not supported here")
    return x.max_pool2d(kernel_size, _opts(stride=stride, padding=padding, dilation=dilation, ceil_mode=ceil_mode))


def avg_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
    if divisor_override is not None:
        raise ValueError("avg_pool2d: divisor_override is not supported here")
    return x.avg_pool2d(kernel_size, _opts(stride=stride, padding=padding, ceil_mode=ceil_mode, count_include_pad=count_include_pad))


def adaptive_avg_pool2d(x, output_size):
    return x.adaptive_avg_pool2d(output_size)


def _opts(**kw):
    import _ipu

    return _ipu.options(**kw)
