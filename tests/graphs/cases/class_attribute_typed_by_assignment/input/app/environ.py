class EnvField:
    def get(self):
        return None


class EnvBool(EnvField):
    pass


class EnvInt(EnvField):
    def get(self):
        return 0


class Envs:
    FLAG = EnvBool(False)
    SIZE = EnvInt(1)


envs = Envs()
