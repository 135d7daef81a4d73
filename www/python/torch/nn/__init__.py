"""`torch.nn` for the page's Python. A subclass of `nn.Module` is traced by the package's
tracer through a JS `nn.Module` counterpart: each attribute that is a module is set on it in
assignment order (the module paths and their order are PyTorch's), and its `forward` calls
this module's `forward`. The built-in modules are the package's own (`nn.Linear` is the
package's `nn.Linear`)."""
import _ipu
from _ipu import js, host, call

import torch
from torch import Tensor


class Parameter(Tensor):
    """`nn.Parameter(tensor)`: registered on the module it is assigned to (the package's
    `registerParameter`), with the host tensor's values; used in that module's trace, it is
    the module's parameter (`self.w`, or the object itself kept in a list)."""

    __slots__ = ("_owner",)

    def __new__(cls, data, requires_grad=True):
        if not isinstance(data, Tensor) or data._js is not None or data._host[2] is None:
            raise TypeError("nn.Parameter takes a host tensor with values (torch.randn(...), torch.zeros(...), torch.tensor(...))")
        p = object.__new__(cls)
        p._js, p._host, p._buffer, p._owner = None, data._host, None, None
        return p

    def __init__(self, data, requires_grad=True):
        pass

    @property
    def data(self):
        return Tensor._from_host(*self._host)

    def _traced(self):
        if self._owner is not None:
            module, name = self._owner
            return call(module._js.param, name)._js
        return Tensor._traced(self)


class Module:
    """The base of your modules, as PyTorch's: call `super().__init__()` first, then assign
    submodules, parameters (`nn.Parameter`) and buffers (`register_buffer`)."""

    _js_class = None  # a built-in module's package class

    def __init__(self):
        d = self.__dict__
        d["_submodules"] = {}
        d["_params"] = []
        d["_buffers"] = []
        d["training"] = True
        d["_js"] = js.nn.Module.new()
        mid = _ipu.register(self)
        self._js.forward = host.forwardOf(_ipu.FORWARD, mid)

    @classmethod
    def _wrap(cls, v):
        """A built-in module the package returned (a ModuleList's item, …)."""
        m = _builtin_of(v)
        return m

    def _to_js(self):
        return self._js

    def __setattr__(self, name, value):
        d = self.__dict__
        if "_js" not in d:
            raise AttributeError("cannot assign before Module.__init__() call")
        if isinstance(value, Module):
            d["_submodules"][name] = value
            setattr(self._js, name, value._js)
            d.pop(name, None)
            return
        if isinstance(value, Parameter):
            call(self._js.registerParameter, name, value._host[2], list(value.shape))
            d["_params"].append(name)
            value._owner = (self, name)
            return
        if name in d["_buffers"] and isinstance(value, Tensor) and value._buffer == (self, name):
            return  # `self.count += 1`: the buffer was updated in place (Tensor.add_)
        if name in d["_submodules"]:
            del d["_submodules"][name]
            host.remove(self._js, name)
        object.__setattr__(self, name, value)

    def __getattr__(self, name):
        d = self.__dict__
        if name in d.get("_submodules", {}):
            return d["_submodules"][name]
        if name in d.get("_params", ()) or name in d.get("_buffers", ()):
            if not _ipu.tracing():
                # Outside forward: the host value (the package's state dict, as written back).
                return _host(getattr(call(self._js.stateDict)._js, name))
            if name in d["_params"]:
                return call(self._js.param, name)
            t = _ipu.buffer_values.get((id(self), name))
            if t is None:
                t = call(self._js.buffer, name)
            t._buffer = (self, name)
            return t
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        if name in self.__dict__.get("_submodules", {}):
            del self.__dict__["_submodules"][name]
            host.remove(self._js, name)
        else:
            object.__delattr__(self, name)

    def register_buffer(self, name, tensor, persistent=True):
        if not isinstance(tensor, Tensor) or tensor._js is not None:
            raise TypeError("register_buffer takes a host tensor (torch.zeros(...), torch.tensor(...))")
        values = tensor._host[2] if tensor._host[2] is not None else [0] * tensor.numel()
        if tensor.dtype is torch.float32:
            call(self._js.registerBuffer, name, values, list(tensor.shape))
        else:
            call(self._js.registerBuffer, name, values, list(tensor.shape), tensor.dtype.name)
        self.__dict__["_buffers"].append(name)

    def register_parameter(self, name, param):
        self.__setattr__(name, param)

    def add_module(self, name, module):
        """PyTorch's `add_module`: `module` as the submodule `name` (as `self.name = module`)."""
        if not isinstance(module, Module):
            raise TypeError(f"add_module: {type(module).__name__} is not a Module")
        self.__setattr__(name, module)

    register_module = add_module

    def get_submodule(self, target):
        """The submodule at dotted path `target` (`"layers.0.attn"`); "" is this module."""
        m = self
        for part in target.split(".") if target else ():
            subs = m.__dict__.get("_submodules", {})
            if part not in subs:
                raise AttributeError(f"{type(m).__name__} has no attribute `{part}` (looking up '{target}')")
            m = subs[part]
        return m

    def _state_at(self, target, kind):
        path, _, name = target.rpartition(".")
        m = self.get_submodule(path)
        if name not in m._state_names(kind):
            raise AttributeError(f"`{name}` is not a {kind} of {type(m).__name__} (looking up '{target}')")
        return getattr(m, name)

    def _state_names(self, kind):
        return self.__dict__["_params"] if kind == "parameter" else self.__dict__["_buffers"]

    def get_parameter(self, target):
        """The parameter at dotted path `target` (`"fc1.weight"`): in forward the traced one,
        else its host value."""
        return self._state_at(target, "parameter")

    def get_buffer(self, target):
        """The buffer at dotted path `target`, as `get_parameter`."""
        return self._state_at(target, "buffer")

    def __call__(self, *args, **kw):
        if kw:
            raise TypeError(f"{type(self).__name__}: keyword arguments to a module are not supported here; pass them by position")
        if not _ipu.tracing():
            return self._run_on_host(*args)
        return call(self._js.forward, *args)

    def _run_on_host(self, *args):
        """The module called outside a trace (PyTorch running it on the CPU): the package's
        executor runs it, through an inference wrapper of this module (kept, so it compiles
        once per input shape; it reads the weights a training wrapper left)."""
        import poptorch

        d = self.__dict__
        if d.get("_on_host") is None:
            d["_on_host"] = poptorch.inferenceModel(self)
        return d["_on_host"](*args)

    def forward(self, *args):
        raise NotImplementedError(f"Module [{type(self).__name__}] is missing the required \"forward\" function")

    # -- state, by the package
    def parameters(self, recurse=True):
        return call(self._js.parameters)

    def named_parameters(self, prefix="", recurse=True):
        return [tuple(p) for p in call(self._js.namedParameters)]

    def buffers(self, recurse=True):
        return [b for _, b in self.named_buffers()]

    def named_buffers(self, prefix="", recurse=True):
        return [(n, _host(b._js)) for n, b in call(self._js.namedBuffers)]

    def state_dict(self):
        d = call(self._js.stateDict)._js
        return {k: _host(getattr(d, k)) for k in host.keys(d)}

    def load_state_dict(self, state_dict, strict=True):
        call(self._js.loadStateDict, state_dict, strict)

    def half(self):
        call(self._js.half)
        return self

    def float(self):
        call(self._js.float)
        return self

    def to(self, dtype):
        return self.half() if dtype is torch.float16 else self.float() if dtype is torch.float32 else self

    def train(self, mode=True):
        self.__dict__["training"] = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def children(self):
        return list(self.__dict__.get("_submodules", {}).values())

    def named_children(self):
        return list(self.__dict__.get("_submodules", {}).items())

    def modules(self):
        out = [self]
        for m in self.children():
            out.extend(m.modules())
        return out

    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def zero_grad(self, set_to_none=True):
        pass


def _host(v):
    """A host tensor `{ shape, dtype, data }` from the package, as a torch host tensor."""
    return Tensor._from_host(torch.Size(v.shape), torch._DTYPES[v.dtype], v.data)


class _Builtin(Module):
    """One of the package's modules."""

    def __init__(self, *args):
        d = self.__dict__
        d["_submodules"], d["_params"], d["_buffers"], d["training"] = {}, [], [], True
        d["_js"] = _ipu.construct(self._js_class(), *args)

    def __getattr__(self, name):
        d = self.__dict__
        if name.startswith("_") or "_js" not in d:
            raise AttributeError(name)
        if name in ("weight", "bias") and name in _ipu.py(self._js._stateNames("parameter")):
            # In forward the traced parameter (PyTorch's F.linear(x, self.embed.weight)); else its host value.
            if _ipu.tracing():
                return call(self._js.param, name)
            return _host(getattr(call(self._js.stateDict)._js, name))
        jsname = _ipu.camel(name)
        if host.has(self._js, jsname):
            v = getattr(self._js, jsname)
            if host.isFunction(v):
                return lambda *a: call(v, *a)
            return _ipu.py(v)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name, value):
        object.__setattr__(self, name, value)

    def _state_names(self, kind):
        return list(_ipu.py(self._js._stateNames(kind)))

    def __repr__(self):
        return f"{type(self).__name__}()"


_BUILTINS = {}


def _builtin(jsname):
    def deco(cls):
        cls._js_class = staticmethod(lambda: getattr(js.nn, jsname))
        _BUILTINS[jsname] = cls
        return cls

    return deco


def _builtin_of(v):
    """A Python wrapper of one of the package's module objects."""
    name = host.className(v)
    cls = _BUILTINS.get(name, _Builtin)
    m = cls.__new__(cls)
    d = m.__dict__
    d["_submodules"], d["_params"], d["_buffers"], d["training"], d["_js"] = {}, [], [], True, v
    return m


_ipu.wraps("module")(Module)


@_builtin("Linear")
class Linear(_Builtin):
    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__(in_features, out_features, bias)


@_builtin("LayerNorm")
class LayerNorm(_Builtin):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, device=None, dtype=None):
        if isinstance(normalized_shape, (list, tuple)):
            if len(normalized_shape) != 1:
                raise ValueError("LayerNorm: this engine normalises over the last dimension only")
            normalized_shape = normalized_shape[0]
        if not elementwise_affine:
            raise ValueError("LayerNorm: elementwise_affine=False is not in this engine: it has PyTorch's default elementwise_affine=True")
        if eps == 1e-5:
            super().__init__(normalized_shape)
        else:
            super().__init__(normalized_shape, _ipu.options(eps=eps))


@_builtin("Dropout")
class Dropout(_Builtin):
    def __init__(self, p=0.5, inplace=False):
        super().__init__(p)


@_builtin("ReLU")
class ReLU(_Builtin):
    def __init__(self, inplace=False):
        super().__init__()


@_builtin("GELU")
class GELU(_Builtin):
    def __init__(self, approximate="none"):
        super().__init__()


@_builtin("Embedding")
class Embedding(_Builtin):
    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, **_):
        super().__init__(num_embeddings, embedding_dim)


@_builtin("Flatten")
class Flatten(_Builtin):
    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__(start_dim, end_dim)


@_builtin("Conv2d")
class Conv2d(_Builtin):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True, **_):
        super().__init__(in_channels, out_channels, kernel_size, _ipu.options(stride=stride, padding=padding, dilation=dilation, groups=groups, bias=bias))


@_builtin("BatchNorm2d")
class BatchNorm2d(_Builtin):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, **_):
        opts = _ipu.options(eps=eps, affine=affine, track_running_stats=track_running_stats)
        opts["momentum"] = momentum
        super().__init__(num_features, opts)


@_builtin("MaxPool2d")
class MaxPool2d(_Builtin):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, **_):
        super().__init__(kernel_size, _ipu.options(stride=stride, padding=padding, dilation=dilation, ceil_mode=ceil_mode))


@_builtin("AvgPool2d")
class AvgPool2d(_Builtin):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, **_):
        super().__init__(kernel_size, _ipu.options(stride=stride, padding=padding, ceil_mode=ceil_mode, count_include_pad=count_include_pad))


@_builtin("AdaptiveAvgPool2d")
class AdaptiveAvgPool2d(_Builtin):
    def __init__(self, output_size):
        super().__init__(output_size)


class _Loss(Module):
    """A loss module (no parameters): its forward is the functional form."""

    def __init__(self, reduction="mean", **kw):
        super().__init__()
        self.reduction = reduction
        self.kw = kw


class MSELoss(_Loss):
    def forward(self, input, target):
        return functional.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    def forward(self, input, target):
        return functional.l1_loss(input, target, reduction=self.reduction)


class CrossEntropyLoss(_Loss):
    def __init__(self, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        super().__init__(reduction)
        self.weight, self.ignore_index, self.label_smoothing = weight, ignore_index, label_smoothing

    def forward(self, input, target):
        return functional.cross_entropy(input, target, self.weight, self.ignore_index, self.reduction, self.label_smoothing)


class Softmax(Module):
    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return x.softmax(self.dim)


class LogSoftmax(Softmax):
    def forward(self, x):
        return x.log_softmax(self.dim)


class Sigmoid(Module):
    def forward(self, x):
        return x.sigmoid()


class Tanh(Module):
    def forward(self, x):
        return x.tanh()


class Identity(Module):
    def forward(self, x):
        return x


class ModuleList(Module):
    """PyTorch's ModuleList: its modules are its children `0`, `1`, … (so `convs.3` is the
    path of the fourth), set on the JS counterpart as any submodule."""

    def __init__(self, modules=()):
        super().__init__()
        for m in modules:
            self.append(m)

    def _items(self):
        return list(self.__dict__["_submodules"].values())

    def append(self, module):
        setattr(self, str(len(self)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def __getitem__(self, i):
        items = self._items()
        return type(self)(items[i]) if isinstance(i, slice) else items[i]

    def __len__(self):
        return len(self.__dict__["_submodules"])

    def __iter__(self):
        return iter(self._items())


class Sequential(ModuleList):
    """PyTorch's Sequential: children `0`, `1`, …, each called on the previous one's output."""

    def __init__(self, *modules):
        super().__init__(modules)

    def forward(self, x):
        for m in self:
            x = m(x)
        return x


@_builtin("SerializedEmbedding")
class SerializedEmbedding(_Builtin):
    def __init__(self, num_embeddings, embedding_dim, serialization_factor):
        super().__init__(num_embeddings, embedding_dim, serialization_factor)


from . import functional, init  # noqa: E402,F401
