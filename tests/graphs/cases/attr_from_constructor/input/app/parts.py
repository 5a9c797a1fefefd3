class Engine:
    def start(self):
        return True


class Radio:
    def tune(self, station):
        return station


class Turbine:
    def start(self):
        return False
