def retry(times, flush):
    for _ in range(times):
        flush()


def apply(fn, value):
    return fn(value)


def keep(fn):
    return [fn]


def double(x):
    return 2 * x


class Server:
    def flush_cache(self):
        return True

    def unused(self):
        return False

    def serve(self):
        retry(3, flush=self.flush_cache)
        apply(double, 1)
        keep(self.unused)
