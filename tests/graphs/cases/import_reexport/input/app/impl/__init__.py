from .worker import *
