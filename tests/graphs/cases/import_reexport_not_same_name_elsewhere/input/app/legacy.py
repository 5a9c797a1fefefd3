class Worker:
    def run(self):
        return 0
