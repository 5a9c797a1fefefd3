from typing import Optional

from app.store import Store


class Cache:
    def __init__(self, store: Optional[Store]) -> None:
        self.store = store
        self.backing = self.store

    def lookup(self, key):
        self.store.get(key)
        self.backing.put(key, None)
