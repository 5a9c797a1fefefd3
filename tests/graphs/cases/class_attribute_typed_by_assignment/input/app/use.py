from app.environ import Envs, envs


def configure():
    if envs.FLAG.get():
        return Envs.SIZE.get()
