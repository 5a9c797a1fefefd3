import functools


def alpha():
    return 1


def beta():
    return 2


def never_stored():
    return 3


class Item:
    def __init__(self, x):
        self.x = x

    def weight(self):
        return self.x


def chooser():
    return beta


class Table:
    def __init__(self):
        self.hook = alpha

    def pick(self, items):
        f = alpha
        f()
        pair = (alpha, beta)
        pair[1]()
        first, second = pair
        second()
        for g in [alpha, beta]:
            g()
        make = Item
        make(1)
        chooser()()
        self.hook()
        key = lambda it: it.weight()
        key(Item(2))
        later = functools.partial(beta)
        later()
