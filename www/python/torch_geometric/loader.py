"""`torch_geometric.loader.RandomNodeLoader(data, num_parts, shuffle=…)`: the package's
loaders.RandomNodeLoader (`fixed_size`, `seed`, `epochs` are its own options)."""
import _ipu
from _ipu import js, JsObject


class RandomNodeLoader(JsObject):
    __slots__ = ()

    def __init__(self, data, num_parts, shuffle=False, seed=None, fixed_size=None, epochs=None, **_):
        opts = _ipu.options(num_parts=num_parts, shuffle=shuffle, seed=seed, fixed_size=fixed_size, epochs=epochs)
        JsObject.__init__(self, _ipu.new(js.loaders.RandomNodeLoader, data, opts)._js)

    def __iter__(self):
        return (_ipu.py(b) for b in self._js)
