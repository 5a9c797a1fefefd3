from app.workers import EagleWorker, NgramWorker


def create_worker(name):
    if name == "eagle":
        return EagleWorker
    return NgramWorker
