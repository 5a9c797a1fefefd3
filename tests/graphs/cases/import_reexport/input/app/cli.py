import app
from app import Worker, make_worker


def main():
    Worker().run()
    make_worker()
    app.make_worker()
