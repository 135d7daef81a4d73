"""`poptorch` for the page's Python: PopTorch's API, each call forwarded to the package's
`poptorch` namespace (Options and its groups, the execution strategies, Blocks, the model
wrappers, optimizers, the ops). The package holds every PopTorch rule; see _ipu.py."""
import _ipu
from _ipu import js, host, call, JsObject

import torch
from torch import Tensor

_pt = js.poptorch


def _enum(name):
    """One of PopTorch's enums, its values the package's (strings of the Options JSON)."""
    src = getattr(_pt, name)
    return type(name, (), {k: getattr(src, k) for k in host.keys(src)})


OutputMode = _enum("OutputMode")
ReductionType = _enum("ReductionType")
MeanReductionStrategy = _enum("MeanReductionStrategy")
CommGroupType = _enum("CommGroupType")
VariableRetrievalMode = _enum("VariableRetrievalMode")
Liveness = _enum("Liveness")
AutoStage = _enum("AutoStage")
MatMulSerializationMode = _enum("MatMulSerializationMode")
# PopTorch's old name of OutputMode.
AnchorMode = OutputMode


class _Object(JsObject):
    """A package object made from Python: `cls(*args)` is `new poptorch.<Name>(...args)`."""

    __slots__ = ()
    _jsname = None

    def __init__(self, *args, **kw):
        if kw:
            args = args + (_ipu.options(**kw),)
        JsObject.__init__(self, _ipu.new(getattr(_pt, self._jsname), *args)._js)


class Options(_Object):
    """poptorch.Options: the package's, with its builder methods and nested groups
    (`Training`, `TensorLocations`, `Precision`, …)."""

    __slots__ = ()
    _jsname = "Options"


class TensorLocationSettings(_Object):
    __slots__ = ()
    _jsname = "TensorLocationSettings"


def _strategy(jsname, doc):
    cls = type(jsname, (_Object,), {"__slots__": (), "_jsname": jsname, "__doc__": doc})
    return cls


Stage = _strategy("Stage", "poptorch.Stage(*block_ids)")
Phase = _strategy("Phase", "poptorch.Phase(*stages or block ids)")
PipelinedExecution = _strategy("PipelinedExecution", "poptorch.PipelinedExecution(*stages or AutoStage)")
ShardedExecution = _strategy("ShardedExecution", "poptorch.ShardedExecution(*stages or AutoStage)")
class _Phased(_Object):
    """A phased strategy: each phase a Phase, or a list of Stages or Block ids (PopTorch
    makes a Phase of each list)."""

    __slots__ = ()

    def __init__(self, *phases):
        _Object.__init__(self, *[Phase(*p) if isinstance(p, (list, tuple)) and any(isinstance(x, Stage) for x in p) else p for p in phases])


SerialPhasedExecution = type("SerialPhasedExecution", (_Phased,), {"__slots__": (), "_jsname": "SerialPhasedExecution"})
ParallelPhasedExecution = type("ParallelPhasedExecution", (_Phased,), {"__slots__": (), "_jsname": "ParallelPhasedExecution"})


def setLogLevel(level):
    """Accepted (PopTorch's log level): the page shows no PopTorch log."""


# ---------------------------------------------------------------- Blocks


class Block:
    """`with poptorch.Block("id", ipu_id=1):` (the package's block scope), or
    `poptorch.Block.start("id", ipu_id)` (its beginBlock)."""

    def __init__(self, user_id=None, ipu_id=None):
        self.user_id, self.ipu_id = user_id, ipu_id

    def __enter__(self):
        call(js._enterBlock, self.user_id, self.ipu_id)
        return self

    def __exit__(self, *exc):
        call(js._exitBlock)
        return False

    @staticmethod
    def start(user_id=None, ipu_id=None):
        call(js.beginBlock, user_id, ipu_id)

    @staticmethod
    def useAutoId():
        raise NotImplementedError("Block.useAutoId: name each Block (poptorch.Block('name', ipu_id=…))")


def BeginBlock(layer_to_call, user_id=None, ipu_id=None):
    """Starts Block `user_id` on `ipu_id` each time `layer_to_call` is called (PopTorch's
    forward pre-hook): the package's `poptorch.BeginBlock` marks the module, and it is
    returned."""
    if not isinstance(layer_to_call, torch.nn.Module):
        raise TypeError("module is not an instance of torch.nn.Module or function.")
    call(js.poptorch.BeginBlock, layer_to_call._js, user_id, ipu_id)
    return layer_to_call


def BlockFunction(user_id=None, ipu_id=None):
    def deco(fn):
        def wrapped(*a, **k):
            with Block(user_id, ipu_id):
                return fn(*a, **k)

        return wrapped

    return deco


# ---------------------------------------------------------------- the models


class PoplarExecutor(JsObject):
    """What trainingModel / inferenceModel return: the package's PoplarExecutor. Calling it
    runs the model (host tensors in, host tensors out)."""

    __slots__ = ()

    def __call__(self, *args):
        args = named_inputs(self, args)
        _record(self, args)
        return _out(call(self._js.call, *args))

    def compile(self, *args):
        args = named_inputs(self, args)
        _record(self, args)
        return _out(call(self._js.compile, *args))

    def _value(self, v):
        return _out(_ipu.py(v))

    def __getattr__(self, name):
        try:
            return JsObject.__getattr__(self, name)
        except AttributeError:
            # PopTorch: the wrapped model's attributes through the wrapper
            # (`poptorch_model.W.replicaGrouping(...)`, `poptorch_model.decoder.weight`).
            module = _ipu.py(self._js.model)
            if name.startswith("_") or not (name in module.__dict__.get("_submodules", {}) or name in module.__dict__.get("_params", ()) or isinstance(module, torch.nn._Builtin)):
                raise
            return _ModelPath(self, name)


class _ModelPath:
    """An attribute path of the wrapped model (`poptorch_model.decoder.weight`): its
    parameter's per-replica settings are the wrapper's, by the parameter's name."""

    def __init__(self, executor, path):
        self._executor, self._path = executor, path

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return _ModelPath(self._executor, f"{self._path}.{name}")

    def replicaGrouping(self, comm_group_type, shards, variable_retrieval_mode=None):
        call(self._executor._js.replicaGrouping, self._path, comm_group_type, shards, variable_retrieval_mode)
        return self

    perReplica = replicaGrouping


_ipu.wraps("executor")(PoplarExecutor)
_ipu.wraps("options")(Options)


def _record(model, args):
    """Files the call as the model's last (_ipu.last_call), its inputs' shapes."""
    specs = []
    for i, a in enumerate(args):
        v = a._to_js() if hasattr(a, "_to_js") else a
        if not isinstance(v, _ipu.JsProxy) or not host.has(v, "shape"):
            return
        specs.append({"name": host.get(v, "name") or f"input{i}", "shape": list(v.shape), "dtype": host.get(v, "dtype") or "float32"})
    _ipu.last_call[:] = [(model, specs)]


def named_inputs(model, args):
    """The call's tensors named by the parameters of the module's forward, as PopTorch names
    a model's inputs."""
    import inspect

    module = _ipu.py(model._js.model)
    try:
        params = inspect.signature(module.forward).parameters.values()
        names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)][: len(args)]
    except (TypeError, ValueError):
        return args
    def named(a, name):
        if isinstance(a, Tensor) and a._js is None:
            return host.named(a._to_js(), name)
        return a

    out = []
    for name, a in zip(names, args):
        # An input given as a list of parts (one per micro-batch of the combined batch):
        # each part named as the input.
        out.append([named(x, name) for x in a] if isinstance(a, (list, tuple)) else named(a, name))
    return out + list(args[len(names):])


def slice(tensor, dim, start, end):
    """poptorch.slice (the package's): a slice with constant bounds, or bounds that differ by a constant."""
    return call(_pt.slice, tensor, dim, start, end)


def _out(v):
    if isinstance(v, list):
        return type(v)(_out(x) for x in v)
    if isinstance(v, JsObject) and host.isHostTensor(v._js):
        return torch.nn._host(v._js)
    return v


def trainingModel(model, options=None, optimizer=None):
    return call(_pt.trainingModel, model, options, optimizer)


def inferenceModel(model, options=None):
    return call(_pt.inferenceModel, model, options)


# ---------------------------------------------------------------- ops


def identity_loss(x, reduction):
    return call(_pt.identity_loss, x, reduction)


def recomputationCheckpoint(*tensors):
    return call(_pt.recomputationCheckpoint, *tensors)


def set_available_memory(tensor, available_memory_proportion):
    return call(_pt.set_available_memory, tensor, available_memory_proportion)


def serializedMatMul(lhs, rhs, mode, factor=0, keep_precision=False):
    return call(_pt.serializedMatMul, lhs, rhs, mode, factor, keep_precision)


def dynamic_slice(tensor, dim, start, size, step=1):
    return call(_pt.dynamicSlice, tensor, dim, start, size, step)


# ---------------------------------------------------------------- optimizers

# PopTorch's own enums module (poptorch.enums.CommGroupType, …).
enums = type("enums", (), {n: globals()[n] for n in ("OutputMode", "ReductionType", "MeanReductionStrategy", "CommGroupType", "VariableRetrievalMode", "Liveness", "AutoStage", "MatMulSerializationMode")})


class _Optimizer(_Object):
    __slots__ = ()

    def __init__(self, params, lr=None, **kw):
        params = list(params) if not isinstance(params, (list, tuple)) and not host.isArray(params) else params
        if lr is not None:
            kw["lr"] = lr
        JsObject.__init__(self, _ipu.new(getattr(_pt.optim, self._jsname), params, {k: v for k, v in kw.items() if v is not None})._js)

    @property
    def variable_attrs(self):
        return _ipu.py(self._js.variableAttrs)

    def zero_grad(self, set_to_none=True):
        pass


class _Optim:
    pass


optim = _Optim()
for _name in ("SGD", "Adam", "AdamW", "RMSprop", "LAMB"):
    setattr(optim, _name, type(_name, (_Optimizer,), {"__slots__": (), "_jsname": _name}))
del _name
