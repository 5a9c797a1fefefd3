class Streamer:
    def stream(self):
        return 1


class Pool:
    def take(self):
        return 2


def make_pool() -> "Pool":
    return build()


def build():
    return None
