from app import Worker


def main():
    worker = Worker()
    worker.run()
