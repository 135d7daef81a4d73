"""What the page gives your Python code (README "Python in the editor"), read as
`from playground import options, half`: `options` (a poptorch.Options made from the options
panel), `ipus` (the IPUs in the system), `half` (the float16 switch), `dataset` (the
Training view's dataset), `epochs` (set when the Training view runs the code). Also the
engine's helpers the presets use."""
import _ipu
from _ipu import js, host, call

# What the PopTorch and PyTorch exports look for to use the engine's own ops (dropout with a
# given mask, the masked loss, the random mask) where they run in the page.
ENGINE = "ipu-playground"

# The page's context for this run (a JS object; reading `half` or `dataset` is recorded).
_ctx = None
_NAMES = {"options": "options", "ipus": "ipus", "half": "half", "dataset": "dataset", "epochs": "epochs", "data_url": "dataUrl"}


def __getattr__(name):
    if name in _NAMES and _ctx is not None:
        return _ipu.py(host.get(_ctx, _NAMES[name]))
    raise AttributeError(f"module 'playground' has no attribute '{name}'")


def random_mask(shape, p):
    """A dropout mask drawn once (the package's randomMask): pass it to every layer that
    must drop the same units (GroupAddRev's inverse recomputes them)."""
    return call(js.randomMask, list(shape), p)


def is_training():
    """Whether the running trace is a training model's (the package's isTraining)."""
    return bool(js.isTraining())
