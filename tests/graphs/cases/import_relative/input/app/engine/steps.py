def prepare():
    return 1


def finish():
    return 2
