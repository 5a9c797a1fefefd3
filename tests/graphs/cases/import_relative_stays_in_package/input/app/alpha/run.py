from .util import work


def go():
    work()
