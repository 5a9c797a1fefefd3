def work():
    return "beta"
