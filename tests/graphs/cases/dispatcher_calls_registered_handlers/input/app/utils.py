from collections import OrderedDict


class Dispatcher:
    def __init__(self, mapping):
        self._mapping = OrderedDict(mapping)

    def __call__(self, obj):
        for ty, fn in self._mapping.items():
            if isinstance(obj, ty):
                return fn(obj)
        return None


class Registry:
    def __init__(self, mapping):
        self._mapping = mapping
