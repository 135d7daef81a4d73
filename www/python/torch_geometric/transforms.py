"""`torch_geometric.transforms`: the package's transforms, by name (its datasets apply them)."""


class BaseTransform:
    names = ()

    def __init__(self, *a, **k):
        pass


class AddSelfLoops(BaseTransform):
    names = ("AddSelfLoops",)


class NormalizeFeatures(BaseTransform):
    names = ("NormalizeFeatures",)


class ToUndirected(BaseTransform):
    names = ("ToUndirected",)


class Compose(BaseTransform):
    def __init__(self, transforms):
        self.names = tuple(n for t in transforms for n in t.names)
