from . import steps
from ..common import log
from .steps import prepare


def run():
    prepare()
    log("running")
    steps.finish()
