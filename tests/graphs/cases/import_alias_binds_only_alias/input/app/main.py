from app.util import helper as assist


def run():
    assist()
    helper()
