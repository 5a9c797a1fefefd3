class Dispatcher:
    def __init__(self, pairs):
        self._pairs = pairs

    def __call__(self, obj):
        for kind, fn in self._pairs:
            if isinstance(obj, kind):
                return fn(obj)
        return None


class GenerateReq:
    pass


class AbortReq:
    pass


class Unrelated:
    pass


class Scheduler:
    def __init__(self):
        self._dispatcher = Dispatcher(
            [(GenerateReq, self.handle_generate), (AbortReq, self.handle_abort)]
        )
        self._other = Dispatcher([(GenerateReq, self.not_this_one)])

    def handle_generate(self, req):
        return req

    def handle_abort(self, req):
        return req

    def not_this_one(self, req):
        return req

    def incoming(self, recv):
        return self._dispatcher(recv)

    def mistyped(self, req: Unrelated):
        return self._dispatcher(req)
