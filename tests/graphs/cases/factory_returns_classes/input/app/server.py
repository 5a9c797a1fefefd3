from app.registry import create_worker


def serve(name, config):
    worker_class = create_worker(name)
    worker = worker_class(config)
    worker.generate()
