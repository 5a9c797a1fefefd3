from app.workers import make_worker


def serve():
    make_worker().generate()
    make_worker()()
