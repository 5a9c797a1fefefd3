"""The speculation on/off policy is deterministic: same inputs, same decisions; a replay and a
resume from a serialised state match the live run; invariants hold over random loads; the
policy module runs alone, without sgtrace."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from tests.hooks.policy_support import BATCH_ONLY, GATED

import sgtrace.payload
from sgtrace.payload.policies import make_policy, replay
from sgtrace.payload.policy import Decision, Observation, PolicyConfig, Reason, Tier
from sgtrace.payload.rules import Mode, PolicyState

# --- determinism and replay ----------------------------------------------------------------


def random_run(
    config: PolicyConfig, seed: int, length: int = 400
) -> tuple[list[Observation], list[Decision]]:
    """A random load (random walk of batch sizes, gaps between steps, random accept lengths)."""
    rng = random.Random(seed)
    policy = make_policy(config)
    step, batch_size, spec_on, lengths = 0, rng.randint(0, 30), rng.random() < 0.5, None
    observations: list[Observation] = []
    decisions: list[Decision] = []
    for _ in range(length):
        obs = Observation(step, batch_size, lengths, spec_on)
        decision = policy.decide(obs)
        observations.append(obs)
        decisions.append(decision)
        spec_on = decision.spec_on
        good = rng.random() < 0.5
        pool = (1.0, 2.0, 3.0, 4.0) if good else (1.0, 1.0, 1.0, 1.5)
        lengths = tuple(rng.choice(pool) for _ in range(batch_size)) if spec_on else None
        step += rng.randint(1, 3)
        batch_size = max(0, min(40, batch_size + rng.randint(-4, 4)))
    return observations, decisions


RANDOM_CONFIGS = [
    replace(GATED, min_dwell_steps=12, min_accept_samples=5, probe_steps=3),
    replace(BATCH_ONLY, min_dwell_steps=6),
    replace(GATED, on_below=4, off_above=24, min_dwell_steps=0, tiers=(Tier(2, 2), Tier(8, 1))),
    replace(BATCH_ONLY, on_below=12, off_above=16, on_delay_steps=3),
]


@pytest.mark.parametrize("config", RANDOM_CONFIGS)
def test_same_inputs_give_the_same_decisions_and_replay_matches(config: PolicyConfig) -> None:
    for seed in range(20):
        observations, live = random_run(config, seed)
        assert random_run(config, seed)[1] == live
        assert replay(config, observations) == live
        recorded = json.loads(json.dumps([obs.to_dict() for obs in observations]))
        assert replay(config, [Observation.from_dict(o) for o in recorded]) == live
        written = json.loads(json.dumps([d.to_dict() for d in live]))
        assert [Decision.from_dict(d) for d in written] == live


@pytest.mark.parametrize("config", RANDOM_CONFIGS)
def test_resuming_from_a_serialised_state_changes_nothing(config: PolicyConfig) -> None:
    observations, live = random_run(config, seed=7)
    policy = make_policy(config)
    for obs in observations[:150]:
        policy.decide(obs)
    saved = json.loads(json.dumps(policy.state.to_dict()))
    resumed = make_policy(config, PolicyState.from_dict(saved))
    assert resumed.state == policy.state
    assert [resumed.decide(obs) for obs in observations[150:]] == live[150:]


@pytest.mark.parametrize("config", RANDOM_CONFIGS)
def test_invariants_hold_over_random_loads(config: PolicyConfig) -> None:
    reasons: set[Reason] = set()
    for seed in range(30):
        observations, decisions = random_run(config, seed)
        reasons.update(d.reason for d in decisions)
        toggles = [d for d in decisions if d.changed]
        for a, b in zip(toggles, toggles[1:], strict=False):
            # only toggles off end the dwell early: a failed probe, or high load
            probe_ended = (a.reason, b.reason) == (Reason.PROBE, Reason.LOW_ACCEPTANCE)
            high_load = not b.spec_on and b.batch_size >= config.off_above
            assert b.step - a.step >= config.min_dwell_steps or probe_ended or high_load
            if b.spec_on:
                assert b.step - a.step >= config.min_dwell_steps
        low_run = 0
        for obs, d in zip(observations, decisions, strict=True):
            low_run = low_run + 1 if obs.batch_size <= config.on_below else 0
            if d.reason is Reason.LOW_LOAD:
                assert low_run > config.on_delay_steps
            assert (d.step, d.batch_size) == (obs.step, obs.batch_size)
            assert d.changed == (d.spec_on != obs.spec_on)
            assert (d.num_steps == 0) == (not d.spec_on)
            assert not (d.spec_on and obs.batch_size >= config.off_above)  # off at once
            if d.reason is Reason.LOW_ACCEPTANCE:
                breakeven = config.breakeven_accept_length(config.steps_for(obs.batch_size))
                assert d.accept_mean is not None and d.accept_mean < breakeven
            if not config.acceptance_gate and low_run > config.on_delay_steps:
                assert d.spec_on or d.reason is Reason.DWELL_HOLD
    gate_reasons = {Reason.LOW_ACCEPTANCE, Reason.PROBE, Reason.PROBE_PASSED}
    load_reasons = {Reason.STARTUP, Reason.STEADY, Reason.LOW_LOAD, Reason.HIGH_LOAD}
    dwell = {Reason.DWELL_HOLD} if config.min_dwell_steps else set()
    # The random loads reach every rule the config has, so the checks above mean something.
    assert reasons == load_reasons | dwell | (gate_reasons if config.acceptance_gate else set())


def test_advance_is_pure() -> None:
    state = PolicyState(Mode.PROBING, 10, 10, 1.5, 1, 2)
    obs = Observation(11, 2, (1.0, 1.0), True)
    policy = make_policy(GATED)
    first = policy.advance(state, obs)
    assert policy.advance(state, obs) == first
    assert state == PolicyState(Mode.PROBING, 10, 10, 1.5, 1, 2)


POLICY_RUNNER = """\
import importlib.util, json, sys
try:
    import sgtrace  # noqa: F401
    has_sgtrace = True
except ImportError:
    has_sgtrace = False
sys.path.insert(0, sys.argv[1])
from sgtrace_payload.policies import policy_from_dict
from sgtrace_payload.policy import Observation
with open(sys.argv[2]) as fh:
    config = json.load(fh)
with open(sys.argv[3]) as fh:
    observations = [Observation.from_dict(o) for o in json.load(fh)]
policy = policy_from_dict(config)
print(json.dumps({"has_sgtrace": has_sgtrace,
                  "decisions": [policy.decide(o).to_dict() for o in observations]}))
"""


def test_policy_module_runs_alone_without_sgtrace(tmp_path: Path) -> None:
    """Copied into a hook directory as the payload package, it runs where sgtrace is not
    installed, with equal results."""
    config = RANDOM_CONFIGS[0]
    observations, live = random_run(config, seed=3)
    shutil.copytree(Path(sgtrace.payload.__file__).parent, tmp_path / "sgtrace_payload")
    (tmp_path / "config.json").write_text(config.to_json())
    (tmp_path / "obs.json").write_text(json.dumps([o.to_dict() for o in observations]))
    (tmp_path / "run.py").write_text(POLICY_RUNNER)
    done = subprocess.run(
        [sys.executable, "-I", "-S", "run.py", str(tmp_path), "config.json", "obs.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["has_sgtrace"] is False
    assert [Decision.from_dict(d) for d in result["decisions"]] == live
