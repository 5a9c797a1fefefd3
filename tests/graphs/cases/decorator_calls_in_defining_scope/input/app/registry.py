HANDLERS = {}


def register(name):
    def add(func):
        HANDLERS[name] = func
        return func

    return add
