def work():
    return "alpha"
