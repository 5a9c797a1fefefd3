from app.mixins.load import LoadMixin
from app.mixins.save import SaveMixin


class Host(LoadMixin, SaveMixin):
    def report(self) -> None:
        return None
