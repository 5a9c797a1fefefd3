"""A wave's lengths travel from the hook's decision into the trace and back into the
observation the validator replays (``Fact.WAVE_LENGTHS``, ``DecisionRecord.wave_lengths``)."""

from __future__ import annotations

import pytest

from sgtrace.payload.policy import Observation
from sgtrace.payload.record import DecisionRecord
from sgtrace.tracer.events import Facts


def test_wave_lengths_are_read_back_as_whole_numbers_and_anything_else_is_refused() -> None:
    facts = Facts.from_json({"wave_lengths": [64, 66.0, 190], "arriving": 3})
    assert facts.wave_lengths == (64, 66, 190) and facts.to_json()["wave_lengths"] == [64, 66, 190]
    for bad in ([64.5], [True], "64", [None]):
        with pytest.raises(ValueError, match="wave_lengths must be a list of whole numbers"):
            Facts.from_json({"wave_lengths": bad})


def test_a_decision_on_a_wave_replays_with_its_lengths() -> None:
    record = DecisionRecord(
        7, 0, 3, True, True, "cohort", None, arriving=3, wave_lengths=(64, 66, 190)
    )
    obs = record.observation()
    assert (obs.arriving, obs.wave_lengths, obs.spec_on) == (3, (64, 66, 190), False)
    assert Observation.from_dict(obs.to_dict()) == obs
    older = {k: v for k, v in obs.to_dict().items() if k != "wave_lengths"}  # a trace before
    assert Observation.from_dict(older).wave_lengths == ()
