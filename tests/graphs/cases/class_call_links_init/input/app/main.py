from app import models
from app.models import Child, Own


def build():
    Child(2)
    Own()
    models.Plain()
