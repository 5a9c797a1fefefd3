def build():
    def helper():
        return 1

    return helper()


def other():
    return helper()
