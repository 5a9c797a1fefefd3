from app.models import Plain, Scorer


def score():
    scorer = Scorer()
    scorer(3)
    plain = Plain()
    plain(3)
