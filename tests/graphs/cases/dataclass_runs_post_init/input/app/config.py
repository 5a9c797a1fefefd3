from dataclasses import dataclass


class Base:
    def __init__(self):
        self.ready = False


@dataclass
class Config(Base):
    size: int = 1

    def __post_init__(self):
        self.ready = True


class Plain(Base):
    pass


def make():
    Config(2)
    Plain()
