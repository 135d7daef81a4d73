"""`torch` for the page's Python: tensors are the engine's tracing proxies (inside a model's
forward) or host tensors (shapes, dtypes and values outside it); `nn`, `nn.functional`,
dtypes and `manual_seed` forward to the package "ipu-playground" (see _ipu.py). PyTorch's
int64 is the engine's int32 (labels, indices)."""
import builtins as _b
import random as _random

import _ipu
from _ipu import js, host, call


class dtype:
    """A dtype, named as the package names it."""

    __slots__ = ("name", "is_floating_point", "itemsize")

    def __init__(self, name, is_floating_point, itemsize):
        self.name, self.is_floating_point, self.itemsize = name, is_floating_point, itemsize

    def _to_js(self):
        return self.name

    def __repr__(self):
        return f"torch.{self.name}"


float32 = float = dtype("float32", True, 4)
float16 = half = dtype("float16", True, 2)
int32 = int = dtype("int32", False, 4)
# The engine's integers are 32-bit: PyTorch's int64 labels and indices are int32 here.
int64 = long = int32
bool = dtype("bool", False, 1)
_DTYPES = {"float32": float32, "float16": float16, "int32": int32, "bool": bool}
# The package's short names (a traced Tensor's dtype).
_DTYPES.update(f32=float32, f16=float16, i32=int32, u8=bool, pred=bool)
_default_dtype = [float32]
dtype_cls = dtype


def _convert(v, d):
    """A host value as dtype `d` holds it (PyTorch's conversion: integers truncate toward zero)."""
    if d is bool:
        return 1 if v else 0
    return _b.float(v) if d.is_floating_point else _b.int(v)


def _dtype(d):
    if d is None:
        return None
    if isinstance(d, dtype):
        return d
    return _DTYPES[str(d)]


def get_default_dtype():
    return _default_dtype[0]


class device:
    """`torch.device`: the engine has one kind of device (the wrapped model says where a
    graph runs), so every tensor is on `device("cpu")` here."""

    __slots__ = ("type",)

    def __init__(self, type="cpu", index=None):
        object.__setattr__(self, "type", type.type if isinstance(type, device) else str(type))

    def __eq__(self, other):
        return isinstance(other, device) and other.type == self.type

    def __hash__(self):
        return hash(self.type)

    def __repr__(self):
        return f"device(type={self.type!r})"


_CPU = device("cpu")


class Size(tuple):
    def numel(self):
        n = 1
        for d in self:
            n *= d
        return n

    def __repr__(self):
        return f"torch.Size({list(self)})"


def _shape(args):
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        args = args[0]
    return Size(_b.int(a) for a in args)


def _scalar(x, like):
    """A Python number as a constant of `like`'s dtype (the package's `constant`)."""
    return Tensor._wrap(call(js.constant, [x], [], like.dtype.name)._js)


class Tensor:
    """A traced value (inside forward: its methods record ops) or a host tensor (`data`)."""

    __slots__ = ("_js", "_host", "_buffer")

    def __init__(self, *a, **k):
        raise TypeError("make tensors with torch.tensor, torch.zeros, torch.ones, torch.randn or torch.empty")

    @classmethod
    def _wrap(cls, v):
        t = object.__new__(cls)
        t._js, t._host, t._buffer = v, None, None
        return t

    @classmethod
    def _from_host(cls, shape, dt, values):
        t = object.__new__(cls)
        t._js, t._host, t._buffer = None, (Size(shape), dt, values), None
        return t

    def _to_js(self):
        if self._js is not None:
            return self._js
        shape, dt, values = self._host
        if _ipu.tracing():
            return self._traced()
        if values is None:
            return _ipu.to_js_value({"shape": list(shape), "dtype": dt.name})
        return host.hostTensor(_ipu.to_js_value(list(shape)), dt.name, _ipu.to_js_value(values))

    # -- what both kinds have
    @property
    def shape(self):
        return Size(self._host[0]) if self._js is None else Size(self._js.shape)

    @property
    def dtype(self):
        return self._host[1] if self._js is None else _DTYPES[self._js.dtype]

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    @property
    def device(self):
        return _CPU

    def dim(self):
        return len(self.shape)

    ndim = property(dim)

    def numel(self):
        return self.shape.numel()

    def __len__(self):
        return self.shape[0]

    def __repr__(self):
        if self._js is not None:
            return f"tensor(traced, shape={list(self.shape)}, dtype={self.dtype!r})"
        shape, dt, values = self._host
        if values is None:
            return f"tensor(shape={list(shape)}, dtype={dt!r})"
        if self.numel() > 64:
            return f"tensor(shape={list(shape)}, dtype={dt!r})"

        def show(v):
            if isinstance(v, list):
                return "[" + ", ".join(show(x) for x in v) + "]"
            if not dt.is_floating_point:
                return str(v)
            return f"{v:.0f}." if v == _b.int(v) else f"{v:.4f}"

        extra = "" if dt in (float32, int32) else f", dtype={dt!r}"
        return f"tensor({show(self.tolist())}{extra})"

    def __format__(self, spec):
        return format(self.item(), spec) if spec and self.numel() == 1 else repr(self)

    # -- host tensors
    def tolist(self):
        self._need_host()
        shape, _, values = self._host
        values = [0] * Size(shape).numel() if values is None else values if isinstance(values, list) else list(values)
        values = [_b.float(v) for v in values] if self._host[1].is_floating_point else [_b.int(v) for v in values]

        def nest(vals, dims):
            if not dims:
                return vals[0]
            if len(dims) == 1:
                return list(vals)
            step = len(vals) // dims[0]
            return [nest(vals[i * step : (i + 1) * step], dims[1:]) for i in range(dims[0])]

        return nest(values, list(shape))

    def item(self):
        self._need_host()
        return self.tolist() if self.dim() == 0 else self.tolist()[0] if self.numel() == 1 else _no_item()

    def __getitem__(self, index):
        if self._js is None:
            return self.tolist()[index]
        # A traced tensor: constant slices (poptorch.slice, PopTorch's rule for them), an
        # integer index a slice of one whose dimension is then dropped.
        index = index if isinstance(index, tuple) else (index,)
        out, dims = self, []
        for d, i in enumerate(index):
            size = self.shape[d]
            if isinstance(i, slice):
                start, stop, step = i.indices(size)
                if step < 1:
                    raise IndexError("slices with a step below 1 are not supported here")
                if step != 1:
                    out = out._op("slice", d, start, _b.max(stop, start), step)
                elif (start, stop) != (0, size):
                    out = call(js.poptorch.slice, out, d, start, stop)
                dims.append(len(range(start, stop, step)))
            elif isinstance(i, _b.int):
                i = i + size if i < 0 else i
                out = call(js.poptorch.slice, out, d, i, i + 1)
            else:
                raise IndexError(f"index {i!r}: only integers and constant slices index a traced tensor")
        dims.extend(self.shape[len(index):])
        return out if list(out.shape) == dims else out.reshape(*dims)

    def __float__(self):
        return _b.float(self.item())

    def __int__(self):
        return _b.int(self.item())

    def _need_host(self):
        if self._js is not None:
            raise RuntimeError("a traced tensor has no values: it is a value of the graph being traced")

    # -- traced tensors: the package's Tensor methods, by PyTorch's names
    def __getattr__(self, name):
        if name.startswith("_") or (self._js is None and not _ipu.tracing()):
            raise AttributeError(name)
        t = self._traced()
        jsname = _ipu.camel(name)
        if not host.has(t, jsname):
            raise AttributeError(f"Tensor has no method '{name}' in this engine")
        fn = getattr(t, jsname)
        return lambda *a: call(fn, *a)

    def _traced(self):
        """This tensor in the running trace: itself, or a host tensor as a constant of the
        trace (PopTorch freezes a plain tensor attribute so)."""
        return self._js if self._js is not None else _constant(self)._js

    def _op(self, name, *a):
        return call(getattr(self._traced(), name), *a)

    def _other(self, o):
        return o if isinstance(o, Tensor) else _scalar(o, self)

    def __add__(self, o):
        return self._op("add", self._other(o))

    __radd__ = __add__

    def __sub__(self, o):
        return self._op("sub", self._other(o))

    def __rsub__(self, o):
        return self._other(o)._op("sub", self)

    def __mul__(self, o):
        if isinstance(o, Tensor):
            return self._op("mul", o)
        return self._op("scale", o)

    __rmul__ = __mul__

    def __truediv__(self, o):
        if isinstance(o, Tensor):
            return self._op("div", o)
        return self._op("scale", 1.0 / o)

    def __rtruediv__(self, o):
        return self._other(o)._op("div", self)

    def __neg__(self):
        return self._op("neg")

    def __pow__(self, o):
        return self._op("pow", self._other(o))

    def __matmul__(self, o):
        return self._op("matmul", o)

    def view(self, *shape):
        return self.reshape(*shape)

    def reshape(self, *shape):
        return self._op("reshape", list(_shape(shape)))

    def permute(self, *dims):
        return self._op("permute", list(_shape(dims)))

    def transpose(self, a, b):
        return self._op("transpose", a, b)

    def t(self):
        return self.transpose(0, 1)

    @property
    def T(self):
        return self.transpose(-2, -1) if self.dim() >= 2 else self

    def flatten(self, start_dim=0, end_dim=-1):
        return self._op("flatten", start_dim, end_dim)

    def _dims(self, dim):
        return None if dim is None else ([dim] if not isinstance(dim, (list, tuple)) else list(dim))

    def mean(self, dim=None, keepdim=False):
        return self._op("mean", self._dims(dim), keepdim)

    def sum(self, dim=None, keepdim=False):
        return self._op("sum", self._dims(dim), keepdim)

    def max(self, dim, keepdim=False):
        return self._op("max", dim, keepdim)

    def argmax(self, dim, keepdim=False):
        return self._op("argmax", dim, keepdim)

    def softmax(self, dim):
        return self._op("softmax", dim)

    def log_softmax(self, dim):
        return self._op("logSoftmax", dim)

    def to(self, *args, dtype=None, device=None, copy=False, non_blocking=False):
        """PyTorch's `to(dtype)`, `to(device)`, `to(device, dtype)`, `to(other)`: this tensor
        itself when its dtype is already that (as PyTorch returns `self`), unless `copy`."""
        for a in args:
            if isinstance(a, Tensor):
                dtype = a.dtype
            elif isinstance(a, dtype_cls) or (isinstance(a, str) and a in _DTYPES):
                dtype = _dtype(a)
        d = _dtype(dtype)
        if d is None or (d is self.dtype and not copy):
            return self
        if self._js is None and not _ipu.tracing():
            shape, _, values = self._host
            if values is not None:
                values = [_convert(v, d) for v in (values if isinstance(values, list) else list(values))]
            return Tensor._from_host(shape, d, values)
        return self._op("cast", d.name)

    def type(self, d):
        return self.to(d)

    def half(self):
        return self.to(float16)

    def float(self):
        return self.to(float32)

    def int(self):
        return self.to(int32)

    def long(self):
        return self.to(int32)

    def contiguous(self):
        return self

    def detach(self):
        return self

    def clone(self):
        return self

    # -- a registered buffer, changed in place (PyTorch's buf.copy_(v), buf.add_(v), buf += v)
    def copy_(self, value):
        if self._buffer is None:
            raise RuntimeError("in-place updates are supported on a module's registered buffers only (self.register_buffer)")
        module, name = self._buffer
        call(module._js.updateBuffer, name, value)
        value = value if isinstance(value, Tensor) else _scalar(value, self)
        out = Tensor._wrap(value._js)
        out._buffer = self._buffer
        _ipu.buffer_values[(id(module), name)] = out
        return out

    def add_(self, o):
        return self.copy_(self + o)

    def __iadd__(self, o):
        return self.add_(o) if self._buffer is not None else self + o


def _no_item():
    raise ValueError("only one element tensors can be converted to Python scalars")


@_ipu.wraps("host")
class _HostFromJs:
    """A host tensor { shape, dtype, data } from the package, as a torch host tensor (its
    values stay the package's typed array until read)."""

    @staticmethod
    def _wrap(v):
        return Tensor._from_host(Size(v.shape), _DTYPES[v.dtype], v.data)


_ipu.wraps("tensor")(Tensor)
_ipu.wraps("sparse")(Tensor)


def _constant(t):
    """A host tensor as a constant of the running trace (the package's `constant`): what
    PyTorch's tracer records for a tensor made or used in forward."""
    shape, dt, values = t._host
    values = [0] * shape.numel() if values is None else values if isinstance(values, list) else list(values)
    return call(js.constant, values, list(shape), dt.name)


def _made(t):
    """A tensor made by torch.zeros, torch.arange, …: a constant when made in forward."""
    return _constant(t) if _ipu.tracing() else t


def _make(shape, dtype, fill):
    dt = _dtype(dtype) or _default_dtype[0]
    shape = _shape(shape)
    n = shape.numel()
    return _made(Tensor._from_host(shape, dt, None if fill is None else [fill() for _ in range(n)]))


def zeros(*shape, dtype=None, **_):
    return _make(shape, dtype, lambda: 0)


def ones(*shape, dtype=None, **_):
    return _make(shape, dtype, lambda: 1)


def full(shape, value, dtype=None, **_):
    """Outside a trace a host tensor; in forward the package's `full` (one op, no values)."""
    if _ipu.tracing():
        dt = _dtype(dtype) or (bool if isinstance(value, _b.bool) else _default_dtype[0] if isinstance(value, _b.float) else int32)
        number = (1 if value else 0) if isinstance(value, _b.bool) else value
        return call(js.full, list(_shape([shape] if isinstance(shape, _b.int) else shape)), number, dt.name)
    return _make(shape if isinstance(shape, (list, tuple)) else (shape,), dtype, lambda: value)


def empty(*shape, dtype=None, **_):
    """A shape-only host tensor (what the page's `inputs` take: one micro-batch)."""
    return _make(shape, dtype, None)


# Host values drawn for torch.randn / torch.rand (made up example data, not a parameter
# init: the package makes its modules' parameters itself).
_rng = _random.Random(0)


def randn(*shape, dtype=None, **_):
    return _make(shape, dtype, lambda: _rng.gauss(0.0, 1.0))


def rand(*shape, dtype=None, **_):
    return _make(shape, dtype, _rng.random)


def randint(low, high=None, size=(), dtype=None, **_):
    if high is None:
        low, high = 0, low
    return _make(size, dtype or int32, lambda: _rng.randrange(low, high))


def arange(start, end=None, step=1, dtype=None, **_):
    if end is None:
        start, end = 0, start
    values = list(range(start, end, step))
    return _made(Tensor._from_host(Size([len(values)]), _dtype(dtype) or int32, values))


def tensor(data, dtype=None, **_):
    shape = []
    d = data
    while isinstance(d, (list, tuple)):
        shape.append(len(d))
        d = d[0] if d else 0
    flat = []

    def walk(x):
        if isinstance(x, (list, tuple)):
            for y in x:
                walk(y)
        else:
            flat.append(x)

    walk(data)
    if dtype is None:
        dtype = float32 if any(isinstance(v, _b.float) for v in flat) else int32
    return _made(Tensor._from_host(Size(shape), _dtype(dtype), flat))


def manual_seed(seed):
    """Seeds the package's generator (its modules' initial parameters) and the host values above."""
    _rng.seed(seed)
    call(js.manualSeed, seed)


def split(tensor, split_size_or_sections, dim=0):
    """Pieces of `tensor` along `dim` (the package's one `split` op): of the given sizes, or
    of `split_size_or_sections` each, the last one smaller (PyTorch's two forms)."""
    size = tensor.shape[dim]
    if isinstance(split_size_or_sections, _b.int):
        if split_size_or_sections < 1:
            raise ValueError(f"split: split_size must be positive, got {split_size_or_sections}")
        sizes = [min(split_size_or_sections, size - s) for s in range(0, size, split_size_or_sections)]
    else:
        sizes = list(split_size_or_sections)
    return tuple(tensor._op("split", sizes, dim))


def chunk(tensor, chunks, dim=0):
    """torch.chunk: pieces of ceil(size / chunks) (maybe fewer than `chunks`)."""
    size = tensor.shape[dim]
    return split(tensor, _b.max(1, -(-size // chunks)), dim)


def add(input, other, alpha=1):
    return input + (other if alpha == 1 else other * alpha)


def sub(input, other, alpha=1):
    return input - (other if alpha == 1 else other * alpha)


def mul(input, other):
    return input * other if isinstance(input, Tensor) else other * input


def div(input, other):
    return input / other


def pow(input, exponent):
    return input ** exponent


def neg(x):
    return -x


def where(condition, input, other):
    """`input` where `condition`, else `other` (a number is a constant of the other's dtype)."""
    if not isinstance(input, Tensor):
        input = _scalar(input, other)
    if not isinstance(other, Tensor):
        other = _scalar(other, input)
    return input._op("where", condition, other)


def index_select(input, dim, index):
    return input._op("indexSelect", dim, index)


def gather(input, dim, index):
    return input._op("gather", dim, index)


def argmax(input, dim, keepdim=False):
    return input.argmax(dim, keepdim)


class _MaxResult(tuple):
    """torch.max(x, dim)'s (values, indices): the indices are the package's argmax, made
    when they are read."""

    def __new__(cls, x, dim, keepdim):
        r = tuple.__new__(cls, ())
        r._args = (x, dim, keepdim)
        return r

    @property
    def values(self):
        x, dim, keepdim = self._args
        return x._op("max", dim, keepdim)

    @property
    def indices(self):
        x, dim, keepdim = self._args
        return x._op("argmax", dim, keepdim)

    def __iter__(self):
        return iter((self.values, self.indices))


def max(input, dim=None, keepdim=False):
    if dim is None:
        raise TypeError("torch.max(x) without dim is not supported here: give dim")
    return _MaxResult(input, dim, keepdim)


def cat(tensors, dim=0):
    return call(js.concat, list(tensors), dim)


concat = cat


def matmul(a, b):
    return a @ b


def relu(x):
    return x.relu()


def sigmoid(x):
    return x.sigmoid()


def tanh(x):
    return x.tanh()


def exp(x):
    return x.exp()


def log(x):
    return x.log()


def sqrt(x):
    return x.sqrt()


def softmax(x, dim):
    return x.softmax(dim)


def flatten(x, start_dim=0, end_dim=-1):
    return x.flatten(start_dim, end_dim)


def transpose(x, a, b):
    return x.transpose(a, b)


def mean(x, dim=None, keepdim=False):
    return x.mean(dim, keepdim)


def sum(x, dim=None, keepdim=False):
    return x.sum(dim, keepdim)


class no_grad:
    """Accepted for PyTorch code; the engine's wrappers decide what is differentiated."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __call__(self, fn):
        return fn


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether two host tensors are close element by element (PyTorch's formula)."""
    x, y = a.tolist(), b.tolist()

    def flat(v):
        return [e for w in v for e in flat(w)] if isinstance(v, list) else [v]

    return list(a.shape) == list(b.shape) and all(abs(p - q) <= atol + rtol * abs(q) for p, q in zip(flat(x), flat(y)))


def is_tensor(x):
    return isinstance(x, Tensor)


from . import nn, optim, testing  # noqa: E402,F401
from .nn import functional  # noqa: E402,F401
