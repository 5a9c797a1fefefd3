class LoadMixin:
    def load(self) -> None:
        self.save()


class SaveMixin:
    def save(self) -> None:
        return None


class OtherSaveMixin:
    def save(self) -> None:
        return None
