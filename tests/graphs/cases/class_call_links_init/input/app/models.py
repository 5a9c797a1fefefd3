from app.base import Base


class Child(Base):
    pass


class Own(Base):
    def __init__(self):
        super().__init__(1)


class Plain:
    pass
