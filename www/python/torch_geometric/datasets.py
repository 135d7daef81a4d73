"""`torch_geometric.datasets.Planetoid(root, name, split=…, transform=…)`: the package's
datasets.Planetoid, from the raw files the page serves (`root` is not read: the files come
from the page's data folder, or, in Node, from the files handed to the runner)."""
import _ipu
from _ipu import js, host, call, JsObject


class NeedData(Exception):
    """Raised when the raw files of `name` are not loaded yet: the runner fetches them and
    runs the code again."""

    def __init__(self, name):
        super().__init__(f"the raw files of {name} are not loaded")
        self.name = name


class Planetoid(JsObject):
    __slots__ = ()

    def __init__(self, root, name, split="public", num_train_per_class=20, num_val=500, num_test=1000, transform=None, pre_transform=None, **_):
        files = host.planetoidFiles(name)
        if files is None:
            raise NeedData(name)
        names = []
        for t in (pre_transform, transform):
            if t is not None:
                names.extend(t.names)
        opts = {"split": split, "transform": names}
        if split == "random":
            opts.update(numTrainPerClass=num_train_per_class, numVal=num_val, numTest=num_test)
        JsObject.__init__(self, _ipu.new(js.datasets.PlanetoidDataset, name, files, opts)._js)

    def __getitem__(self, i):
        return call(self._js.get, i)

    def __len__(self):
        return 1

    @property
    def num_features(self):
        return self[0].numFeatures

    @property
    def num_classes(self):
        return self[0].numClasses
