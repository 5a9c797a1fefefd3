class Worker:
    def run(self):
        return 1


def make_worker():
    return Worker()
