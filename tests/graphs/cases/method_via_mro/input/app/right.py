from app.base import Base


class Right(Base):
    def step(self):
        return super().step()

    def describe(self):
        return "right"
