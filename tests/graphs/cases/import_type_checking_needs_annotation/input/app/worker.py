class Worker:
    def step(self):
        return 1
