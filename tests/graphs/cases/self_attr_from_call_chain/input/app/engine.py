from app.parts import Pool, Streamer, make_pool

try:
    from fastlib import Accel
except ImportError:

    class Accel:
        def boost(self):
            return 0


class Engine:
    def __init__(self):
        self.streamer = self.streamer_class()(1)
        self.pool = make_pool()

    def streamer_class(self):
        return Streamer

    def step(self):
        self.streamer.stream()
        self.pool.take()
        if (pool := make_pool()) is not None:
            pool.take()
        local = make_pool()
        local.take()
        Accel().boost()
        return Pool
