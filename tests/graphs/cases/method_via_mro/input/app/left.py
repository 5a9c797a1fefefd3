from app.base import Base


class Left(Base):
    def hello(self):
        return "left"
