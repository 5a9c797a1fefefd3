from app.model import Req


def finish_all(items, names: list):
    for item in items:
        item.finish()
    for name in names:
        name.finish()
    return Req
