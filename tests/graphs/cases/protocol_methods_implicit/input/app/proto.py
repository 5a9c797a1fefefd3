class Lock:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class Bag:
    def __iter__(self):
        return self

    def __next__(self):
        raise StopIteration


class Failure(Exception):
    def __init__(self, why):
        super().__init__(why)


class Scorer:
    def __call__(self, x):
        return x


class Plain:
    pass


def work(path):
    with Lock():
        pass
    for item in Bag():
        print(item)
    for n in [1, 2]:
        print(n)
    with open(path) as handle:
        handle.read()
    score = Scorer()
    score(1)
    Plain()()
    raise Failure("no")
