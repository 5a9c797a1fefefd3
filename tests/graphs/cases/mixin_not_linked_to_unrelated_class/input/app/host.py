from app.mixins import LoadMixin, OtherSaveMixin, SaveMixin


class Host(LoadMixin, SaveMixin):
    pass


class Unrelated(OtherSaveMixin):
    pass
