"""frozen.py builds the hook's values without their ``__init__``: each must be the value the
constructor (or ``dataclasses.replace``) makes, field for field and in field order, so that it
compares, pickles (the carrier broadcasts records) and converts alike."""

from __future__ import annotations

import pickle
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import pytest

from sgtrace.payload.calibration import Calibration, Failures, Probe, fold
from sgtrace.payload.frozen import build, once, replaced
from sgtrace.payload.policy import Observation
from sgtrace.payload.record import DecisionRecord
from sgtrace.payload.rules import Block, BucketRates, Mode, PolicyState
from sgtrace.payload.window import Window, window_of_periods


def assert_same_value(made: Any, expected: Any) -> None:
    assert type(made) is type(expected)
    assert made == expected
    assert list(vars(made).items()) == list(vars(expected).items())  # fields, in order
    assert pickle.dumps(made) == pickle.dumps(expected)
    assert asdict(made) == asdict(expected)
    assert hash(made) == hash(expected)


def _calibration() -> Calibration:
    cal = Calibration(probe=Probe(True, 3, samples=2), failures=(Failures(4, 1),))
    for step in range(12):
        cal = fold(cal, step, batch_size=4 + step % 3, ran_on=step > 5, period=0.005, window=8)
    return cal


def test_build_makes_what_the_constructor_makes() -> None:
    cal = _calibration()
    fields = {f: getattr(cal, f) for f in ("windows", "last_ran_on", "run", "probe", "failures")}
    assert_same_value(build(Calibration, **fields, recent=cal.recent), replace(cal))
    assert_same_value(build(Calibration), Calibration())  # the defaults
    values = dict(step=3, batch_size=5, accept_lengths=(2.0, 3.0), spec_on=True)
    assert_same_value(
        build(Observation, **values, step_period_s=0.004),
        Observation(**values, step_period_s=0.004),  # type: ignore[arg-type]
    )
    assert_same_value(
        build(
            DecisionRecord,
            step=3,
            rank=0,
            batch_size=5,
            spec_on=False,
            changed=True,
            reason="measured",
            accept_length=2.5,
            wave_lengths=(3, 9),
        ),
        DecisionRecord(3, 0, 5, False, True, "measured", 2.5, wave_lengths=(3, 9)),
    )


def test_a_window_is_built_as_its_constructor_would() -> None:
    made = window_of_periods(True, 8, (0.010, 0.011, 0.013, 0.012), (5, 6, 8, 8), step=7)
    expected = Window(**{f: getattr(made, f) for f in Window.__dataclass_fields__})
    assert_same_value(made, expected)
    assert (made.seconds, made.relative_error) == (expected.seconds, expected.relative_error)


def test_replaced_is_dataclasses_replace() -> None:
    state = PolicyState(
        mode=Mode.PROBING,
        last_step=4,
        rates=(BucketRates(4, on=2.0),),
        block=Block(4, ran_on=True),
        calibration=_calibration(),
    )
    changes = dict(last_step=9, accept_mean=2.5, switch_fit=(1.0, 2.0, 3.0, 4.0, 5.0))
    assert_same_value(replaced(state, **changes), replace(state, **changes))  # type: ignore[arg-type]
    assert replaced(state) == state and replaced(state) is not state


def test_replaced_copies_no_cached_reading() -> None:
    """A calibration keeps its readings in its ``__dict__`` once read: a replaced one reads
    its own (replace's path), never the one it came from."""
    cal = _calibration()
    assert cal.window_of(True, 8) is not None  # reads cal._made
    moved = replaced(cal, windows=())
    assert_same_value(moved, replace(cal, windows=()))
    assert "_made" not in vars(moved) and moved.window_of(True, 8) is None


def test_build_refuses_a_default_factory() -> None:
    @dataclass(frozen=True)
    class Listed:
        items: list[int] = field(default_factory=list)

    with pytest.raises(TypeError, match="default factory"):
        build(Listed)


def test_once_computes_a_property_on_first_read_only() -> None:
    calls = []

    @dataclass(frozen=True)
    class Square:
        side: float

        @once
        def area(self) -> float:
            """The side squared."""
            calls.append(self.side)
            return self.side * self.side

    square = Square(3.0)
    assert (square.area, square.area, calls) == (9.0, 9.0, [3.0])
    assert vars(square) == {"side": 3.0, "area": 9.0} and Square(3.0) == square
    assert isinstance(Square.area, once) and Square.area.__doc__ == "The side squared."
