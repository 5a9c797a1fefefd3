class SaveMixin:
    def save(self) -> None:
        return None
