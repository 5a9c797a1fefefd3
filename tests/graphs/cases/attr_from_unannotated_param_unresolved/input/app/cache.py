from app.store import Store


class Cache:
    def __init__(self, store) -> None:
        self.store = store

    def lookup(self, key):
        self.store.get(key)


def make_cache(store):
    return Cache(store)


def unused() -> Store:
    return Store()
