"""The bridge from the page's Python to the engine's JavaScript API (the npm package
"ipu-playground", registered in Pyodide as the JS module `ipu_playground`).

Nothing here decides anything about a model: each call is forwarded to the package, which
holds every rule. This module only translates values between the two languages and tells
the package the user's `file:line` before each call (`setCallerSite`), since the JavaScript
stack of a call from Python holds no Python line.
"""
import sys
from asyncio import Future

import ipu_playground as js  # the package (registered by www/engine/python.js)
import _ipu_host as host  # small JS helpers (www/engine/python.js HOST)
from pyodide.ffi import JsProxy, can_run_sync, create_proxy, run_sync, to_js

# The user's file name (protocol.js PYTHON_FILE), set by www/engine/python.js.
USER_FILE = None

# ---------------------------------------------------------------- caller site


def user_line():
    """The line of the innermost frame in the user's file, or None."""
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_filename == USER_FILE:
            return f.f_lineno
        f = f.f_back
    return None


_site = [None]


def _tell(line):
    """Tells the package the user's line its ops record (None: the JS caller's again)."""
    if line is None:
        js.setCallerSite(None)
    else:
        js.setCallerSite(USER_FILE, line)
    _site[0] = line


class _AtUserLine:
    """While it is entered, the package's ops record the user's current line; then the
    line told before, for a call inside another (a forward the package calls back)."""

    def __enter__(self):
        self.prev = _site[0]
        line = user_line()
        if line is not None and line != self.prev:
            _tell(line)
        return self

    def __exit__(self, *exc):
        if _site[0] != self.prev:
            _tell(self.prev)
        return False


def call(fn, *args):
    """`fn(*args)` (a JS function), the arguments and result translated, with the ops it
    records attributed to the user's current line."""
    with _AtUserLine():
        return py(settled(fn(*[to_js_value(a) for a in args])))


def settled(v):
    """`v`, or what it resolves to when it is a promise: a replicated training model's call
    on the page's replica workers answers with one, and PopTorch's call returns once the
    replicas are done. Python waits for it with Pyodide's `run_sync` (WebAssembly stack
    switching), which the Training view's step allows (www/engine/python.js calls it
    promising)."""
    if not isinstance(v, Future):  # Pyodide gives a JS promise as a PyodideFuture
        return v
    if not can_run_sync():
        raise RuntimeError(
            "this call answered with a promise (a replicated model running on the page's replica "
            "workers) and Python can wait for it only inside the Training view's step"
        )
    return run_sync(v)


def construct(cls, *args):
    """`new cls(...args)`, the arguments translated, at the user's line: the JS object."""
    with _AtUserLine():
        return cls.new(*[to_js_value(a) for a in args])


def new(cls, *args):
    """`new cls(...args)`, as `call`."""
    return py(construct(cls, *args))


# ---------------------------------------------------------------- values


def camel(name):
    """snake_case → camelCase (PopTorch's Python names → the package's JS names)."""
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def options(**kw):
    """Keyword arguments as a JS options object, keys in camelCase, None left out."""
    return {camel(k): v for k, v in kw.items() if v is not None}


def to_js_value(v):
    """A Python value as the package takes it."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, JsProxy):
        return v
    conv = getattr(v, "_to_js", None)
    if conv is not None:
        return conv()
    if isinstance(v, (list, tuple)):
        return to_js([to_js_value(x) for x in v])
    if isinstance(v, dict):
        return to_js({str(k): to_js_value(x) for k, x in v.items()}, dict_converter=host.fromEntries)
    if callable(v):
        return keep(create_proxy(v))
    return to_js(v)


# JS handles to Python callables made during a run: destroyed when the next run starts.
_proxies = []


def keep(p):
    _proxies.append(p)
    return p


def reset():
    """Drops what the previous run made (the page runs the code again on every edit)."""
    for p in _proxies:
        try:
            p.destroy()
        except Exception:
            pass
    _proxies.clear()
    _modules.clear()
    buffer_values.clear()
    last_call.clear()
    _depth[0] = 0
    _tell(None)


_wrappers = {}


def wraps(kind):
    """Registers the Python class that wraps JS values `host.kind(v)` calls `kind`."""

    def deco(cls):
        _wrappers[kind] = cls
        return cls

    return deco


def py(v):
    """A JS value from the package as Python sees it: tensors and modules wrapped, arrays as lists."""
    if not isinstance(v, JsProxy):
        return v
    kind = host.kind(v)
    if kind == "array":
        return [py(x) for x in v]
    if kind == "pymodule":
        return module_of(v)
    cls = _wrappers.get(kind)
    if cls is not None:
        return cls._wrap(v)
    return JsObject(v)


class JsObject:
    """A package object (Options, a strategy, an optimizer, a wrapped model, …): its methods
    are the package's, called by their PopTorch names (camelCase, or snake_case translated)."""

    __slots__ = ("_js",)

    def __init__(self, v):
        object.__setattr__(self, "_js", v)

    @classmethod
    def _wrap(cls, v):
        obj = cls.__new__(cls)
        object.__setattr__(obj, "_js", v)
        return obj

    def _to_js(self):
        return self._js

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        target = self._js
        for key in (name, camel(name)):
            if host.has(target, key):
                v = getattr(target, key)
                if host.isFunction(v):
                    return self._method(v)
                return self._value(v)
        raise AttributeError(f"{type(self).__name__} has no attribute '{name}'")

    def __setattr__(self, name, value):
        setattr(self._js, camel(name), to_js_value(value))

    def _method(self, fn):
        def method(*args, **kw):
            if kw:
                args = args + (options(**kw),)
            r = call(fn, *args)
            # Builders return their own object: keep the Python wrapper.
            return self if isinstance(r, JsObject) and host.same(r._js, self._js) else r

        return method

    def _value(self, v):
        return py(v)

    def __repr__(self):
        return f"<{host.className(self._js)}>"


# ---------------------------------------------------------------- Python modules in the JS tracer

# Each Python nn.Module has a JS nn.Module counterpart (the tracer walks its attributes, as
# PyTorch's named_modules does) whose `forward` calls back into Python. A copy of the JS
# object (nn.GroupAddRev's groups) gets a Python copy of the module on its first call.
_modules = {}
_next_id = [0]


def register(module):
    _next_id[0] += 1
    mid = _next_id[0]
    _modules[mid] = module
    host.tag(module._js, mid, type(module).__name__)
    return mid


def module_of(jsobj, template_id=None):
    """The Python module of a JS counterpart; for a JS copy of one, a Python copy made now."""
    mid = host.tagOf(jsobj)
    if mid is not None and mid in _modules:
        return _modules[mid]
    template = _modules[template_id if template_id is not None else host.templateOf(jsobj)]
    clone = type(template).__new__(type(template))
    state = dict(template.__dict__)
    state["_js"] = jsobj
    subs = {}
    for name in template.__dict__.get("_submodules", {}):
        subs[name] = py(getattr(jsobj, name))
    state["_submodules"] = subs
    clone.__dict__.update(state)
    register(clone)
    return clone


_depth = [0]


def tracing():
    """Whether a module's forward is running (inside the package's trace)."""
    return _depth[0] > 0


# The value each buffer holds in the running trace after an in-place update (module id,
# name) → tensor: what `self.count` reads after `self.count += 1`, as in PyTorch.
buffer_values = {}


def _forward_from_js(this, template_id, args):
    module = module_of(this, template_id)
    # A wrapped model is traced in training or inference mode (PopTorch's model.train()/eval()).
    module.__dict__["training"] = bool(js.isTraining())
    if _depth[0] == 0:
        buffer_values.clear()  # a new trace
    _depth[0] += 1
    try:
        out = module.forward(*[py(a) for a in args])
        return to_js_value(out)
    finally:
        _depth[0] -= 1


FORWARD = create_proxy(_forward_from_js)


# ---------------------------------------------------------------- running the user's file


def _error(e):
    """A Python exception as the page's error: message, the line in the user's file, and
    the package's fields when the package raised it."""
    import traceback

    info = {"message": f"{type(e).__name__}: {e}", "kind": "model"}
    if isinstance(e, SyntaxError) and e.filename == USER_FILE:
        info.update(kind="syntax", message=f"SyntaxError: {e.msg}", line=e.lineno, column=e.offset or 1)
        return info
    line = None
    for frame in traceback.extract_tb(e.__traceback__):
        if frame.filename == USER_FILE:
            line = frame.lineno
    if line is not None:
        info["line"] = line
    err = getattr(e, "js_error", None)
    if err is None and isinstance(e, JsProxy):
        err = e
    if err is not None:
        msg = host.errorMessage(err)
        if msg:
            info["message"] = msg
        for key in ("code", "option", "fix", "source"):
            v = host.field(err, key)
            if v is not None:
                info[key] = v
        kind = host.field(err, "kind")
        if kind is not None:
            info["engineKind"] = kind
    return info


def _inputs(value, model):
    """The `inputs` of the user's file as the page takes them: a dict of name → tensor, or
    a list (named by the parameters of the model's forward, as PopTorch names inputs), one
    micro-batch; shape-only tensors (torch.empty) are shapes."""
    if isinstance(value, dict):
        items = list(value.items())
    else:
        import poptorch

        named = poptorch.named_inputs(model, list(value)) if hasattr(model, "_js") and host.has(model._js, "model") else list(value)
        items = [(None, v) for v in named]
    out = []
    for i, (name, v) in enumerate(items):
        spec = to_js_value(v)
        out.append(host.named(spec, name if name is not None else f"input{i}"))
    return to_js(out)


def _train(value):
    """`train = {"parts": loader, "step": fn(part) -> loss, "evaluate": fn() -> {train, val, test}}`."""
    if value is None:
        return None

    def step(part):
        r = value["step"](py(part))
        return None if r is None else float(r)

    def evaluate():
        return to_js_value(dict(value["evaluate"]()))

    return host.train(to_js_value(value["parts"]), keep(create_proxy(step)), keep(create_proxy(evaluate)))


# The last call of a wrapped model (poptorch.PoplarExecutor.__call__ / compile): the model
# and its inputs' { name, shape, dtype }, so a file that runs its model without setting
# `inputs` (PopTorch's examples) is planned as it was called.
last_call = []


def _called(scope):
    """`model` and `inputs` from the last call of a wrapped model: one micro-batch of it."""
    if not last_call:
        return None
    model, specs = last_call[0]
    factor = model._js.combinedBatchFactor
    inputs = []
    for s in specs:
        shape = list(s["shape"])
        if shape:
            shape[0] //= factor
        inputs.append(host.named(to_js_value({"shape": shape, "dtype": s["dtype"]}), s["name"]))
    return model, to_js(inputs)


def run(code, ctx):
    """Runs the user's file (`model.py`); returns the page's export object
    {default: {model, inputs, train?}, revgnn?} or {error: {...}} or {need: dataset name}."""
    import playground

    reset()
    playground._ctx = ctx
    scope = {"__name__": "__main__", "__file__": USER_FILE}
    try:
        exec(compile(code, USER_FILE, "exec"), scope)
        exports = {}
        if "revgnn" in scope and isinstance(scope["revgnn"], dict):
            exports["revgnn"] = scope["revgnn"]
        called = _called(scope)
        if "model" in scope and "inputs" in scope:
            default = {"model": scope["model"], "inputs": _inputs(scope["inputs"], scope["model"])}
        elif called is not None:
            default = {"model": called[0], "inputs": called[1]}
        elif "model" in scope:
            raise NameError("the file defines `model` but not `inputs`: one micro-batch's example inputs, e.g. inputs = {\"x\": torch.empty(32, 784)}")
        if "model" in scope or called is not None:
            t = _train(scope.get("train"))
            if t is not None:
                default["train"] = t
            exports["default"] = default
        elif "revgnn" in exports:
            exports["default"] = {"revgnn": exports["revgnn"]}
        return to_js_value(exports)
    except Exception as e:
        from torch_geometric.datasets import NeedData

        if isinstance(e, NeedData):
            return to_js_value({"need": e.name})
        return to_js_value({"error": _error(e)})
