def helper():
    return 1


def unused():
    return 2
