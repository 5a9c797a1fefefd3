from app.servers import Relay, Server


class Host:
    def start(self):
        self.server = self.server_class().launch(self)
        self.port = self.maker().port

    def server_class(self) -> type[Server]:
        return Server

    def maker(self):
        return Relay

    def send(self):
        self.server.push()
        self.port.push()
