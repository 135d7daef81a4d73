"""`safetensors.torch`: `load_file(path)` reads a safetensors file from Pyodide's file
system into `{name: host tensor}`, what `load_state_dict` takes; the package parses it
(`loadSafetensors`), so its errors (a bad header, offsets, dtypes) are the package's."""
import _ipu
from _ipu import js, call
from pyodide.ffi import to_js

import torch


def load_file(filename, device="cpu"):
    with open(filename, "rb") as f:
        data = f.read()
    loaded = call(js.loadSafetensors, to_js(data))._js
    return {name: torch.nn._host(getattr(loaded, name)) for name in _ipu.host.keys(loaded)}


def load(data):
    """The tensors of safetensors bytes (`safetensors.torch.load`)."""
    loaded = call(js.loadSafetensors, to_js(bytes(data)))._js
    return {name: torch.nn._host(getattr(loaded, name)) for name in _ipu.host.keys(loaded)}
