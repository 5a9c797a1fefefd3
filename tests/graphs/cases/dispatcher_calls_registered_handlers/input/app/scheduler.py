from app.utils import Dispatcher, Registry


class GenerateReq:
    pass


class AbortReq:
    pass


class Scheduler:
    def __init__(self):
        self._dispatcher = Dispatcher(
            [
                (GenerateReq, self.handle_generate),
                (AbortReq, self.handle_abort),
            ]
        )
        self._registry = Registry([(AbortReq, self.not_registered)])

    def handle_generate(self, req):
        return req

    def handle_abort(self, req):
        return req

    def not_registered(self, req):
        return req

    def process(self, req):
        return self._dispatcher(req)
