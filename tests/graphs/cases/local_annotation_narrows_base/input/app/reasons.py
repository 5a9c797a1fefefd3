class Reason:
    def to_json(self):
        return {}


class Abort(Reason):
    def to_json(self):
        return {"abort": True}


class Req:
    to_finish: Reason


def abort(req: Req):
    reason: Abort = req.to_finish
    return reason.to_json()


def plain(req: Req):
    reason = req.to_finish
    return reason.to_json()
