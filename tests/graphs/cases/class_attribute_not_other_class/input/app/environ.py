class EnvBool:
    def get(self):
        return False


class EnvInt:
    def get(self):
        return 0


class Envs:
    FLAG = EnvBool()


class Other:
    FLAG = EnvInt()


envs = Envs()
