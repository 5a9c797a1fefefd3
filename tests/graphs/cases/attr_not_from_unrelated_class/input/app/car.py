from app.parts import Engine


class Car:
    def __init__(self):
        self.engine = Engine()


class Boat:
    def sail(self):
        self.engine.start()
