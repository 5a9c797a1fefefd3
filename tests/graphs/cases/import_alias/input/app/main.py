import app.util as u
from app.util import helper as assist


def run():
    assist()
    u.helper()
