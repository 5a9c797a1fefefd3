class Dispatcher:
    def __init__(self, pairs):
        self._pairs = pairs

    def __call__(self, obj):
        for kind, fn in self._pairs:
            if isinstance(obj, kind):
                return fn(obj)
        return None


class Req:
    pass


class GenerateReq(Req):
    pass


class StreamReq(GenerateReq):
    pass


class AbortReq(Req):
    pass


class Scheduler:
    def __init__(self):
        self._dispatcher = Dispatcher(
            [
                (GenerateReq, self.handle_generate),
                (AbortReq, self.handle_abort),
            ]
        )

    def handle_generate(self, req):
        return req

    def handle_abort(self, req):
        return req

    def generate(self, req: GenerateReq):
        return self._dispatcher(req)

    def stream(self, req: StreamReq):
        return self._dispatcher(req)

    def abort(self):
        return self._dispatcher(AbortReq())

    def any_request(self, req: Req):
        return self._dispatcher(req)
