class Req:
    def finish(self):
        return True


class Worker:
    def run(self, req):
        return req
