from app.parts import Engine


class Car:
    def __init__(self):
        self.engine = Engine()
        self.init_radio()

    def init_radio(self):
        from app.parts import Radio

        self.radio = Radio()

    def drive(self):
        self.engine.start()
        self.radio.tune(101)
