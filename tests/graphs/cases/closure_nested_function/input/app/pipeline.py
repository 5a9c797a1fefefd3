def build(steps):
    def apply(value):
        return scale(value)

    def scale(value):
        return value * 2

    class Collector:
        def add(self, value):
            return apply(value)

    return [apply(s) for s in steps], Collector()


def scale(value):
    return value
