from app.registry import register


@register("ping")
def ping():
    return "pong"


class Service:
    @register("stop")
    def stop(self):
        return ping()
