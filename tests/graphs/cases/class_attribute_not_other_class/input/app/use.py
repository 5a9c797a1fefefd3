from app.environ import envs


def configure():
    return envs.FLAG.get()
