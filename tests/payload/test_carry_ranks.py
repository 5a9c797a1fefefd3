"""Several real processes, one per tensor-parallel rank (tests/payload/rank_loop.py): with the
decision carrier every rank applies the same decisions at the same loop iteration, although
each rank's clock is its own; without it, the ranks' decisions diverge."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest
from tests.payload.payload_support import names_before_the_receiver
from tests.payload.rank_loop import NAMES, RankRun, rank_main

from sgtrace.payload.config import SglangNames

ITERATIONS = 2400


def run_ranks(tp_size: int, carry: bool, names: SglangNames = NAMES) -> list[RankRun]:
    """Start ``tp_size`` processes, rank 0 piped to each other rank, and collect their runs
    (``names``: the hook's, where the scheduler receives)."""
    context = multiprocessing.get_context("spawn")
    links = [context.Pipe() for _ in range(tp_size - 1)]
    outs = [context.Pipe(duplex=False) for _ in range(tp_size)]
    processes = []
    for rank in range(tp_size):
        peers = [send for send, _ in links] if rank == 0 else [links[rank - 1][1]]
        args = (rank, tp_size, peers, carry, ITERATIONS, outs[rank][1], names)
        processes.append(context.Process(target=rank_main, args=args))
    for process in processes:
        process.start()
    runs = [receive.recv() for receive, _ in outs if receive.poll(120)]
    for process in processes:
        process.join(30)
    assert len(runs) == tp_size, f"{tp_size - len(runs)} rank(s) sent nothing back"
    return sorted(runs, key=lambda run: run.rank)


def toggles(run: RankRun) -> list[tuple[int, bool, int | None]]:
    """``(step, spec_on, iteration)`` of every toggle the rank recorded (where it applied it)."""
    return [
        (step, on, iteration) for step, on, changed, iteration, _src, _a in run.records if changed
    ]


@pytest.mark.parametrize(
    ("tp_size", "receives"), [(2, "receiver"), (4, "receiver"), (2, "scheduler")]
)
def test_every_rank_applies_the_deciding_ranks_decisions_at_the_same_iteration(
    tp_size: int, receives: str, tmp_path: Path
) -> None:
    """``receives``: in the request receiver component (0.5.13 on), or in the scheduler itself
    as 0.5.9-0.5.12 (the names the map reads from a scheduler shaped as theirs)."""
    names = NAMES if receives == "receiver" else names_before_the_receiver(tmp_path)
    runs = run_ranks(tp_size, carry=True, names=names)
    source = runs[0]
    assert len(toggles(source)) >= 4, toggles(source)  # the policy did switch, both ways
    for run in runs[1:]:
        assert run.launches == source.launches, f"rank {run.rank} launched otherwise"
        assert toggles(run) == toggles(source), f"rank {run.rank}"
        # the other ranks record what was carried: the first decision, then the toggles
        assert [(changed, src) for _s, _on, changed, _i, src, _a in run.records[:2]] == [
            (False, 0),
            (True, 0),
        ]
        assert run.records[0] == source.records[0]
        assert {(changed, src) for _s, _on, changed, _i, src, _a in run.records[1:]} == {(True, 0)}
    # the deciding rank records every decision, each applied at an iteration: one result per
    # iteration but the first, the last decision waiting for the next iteration
    results = [r for r in source.records if not r[5]]
    assert len(results) == ITERATIONS - 2
    assert all(src == 0 and iteration is not None for *_, iteration, src, _a in source.records)
    # asked on the requests arriving at each growth of the batch, in the iteration they came
    arrivals = [
        (step, iteration) for step, *_, iteration, _src, arriving in source.records if arriving
    ]
    assert len(arrivals) >= 2 and all(iteration == step + 2 for step, iteration in arrivals)


def test_without_the_carrier_each_rank_decides_on_its_own_clock_and_they_diverge() -> None:
    runs = run_ranks(2, carry=False)
    assert runs[0].periods != runs[1].periods  # each rank timed its own steps
    assert runs[0].launches != runs[1].launches  # and ran other states: a real server hangs
    assert toggles(runs[0]) != toggles(runs[1])


def test_at_tp_size_one_the_decisions_pass_straight_through_at_the_same_point() -> None:
    """Nothing is broadcast: each decision is applied at the next receive, before the launch
    it governs, so the launches are those of a hook applying it when decided."""
    [carried] = run_ranks(1, carry=True)
    [direct] = run_ranks(1, carry=False)
    # the decision on result k (processed in iteration k + 2) is applied at iteration k + 3;
    # one on requests arriving, in the iteration they arrive (before result k's: k + 2)
    for step, _on, _c, iteration, _src, arriving in carried.records:
        assert iteration == step + (2 if arriving else 3)
    assert any(r[5] for r in carried.records)
    assert {iteration for *_, iteration, _src, _a in direct.records} == {None}
    # each launch runs the state of the latest decision applied at or before its iteration
    state, applied = True, {r[3]: r[1] for r in carried.records}
    for iteration, launched in enumerate(carried.launches):
        state = applied.get(iteration + 1, state)  # the carrier counts from 1
        assert launched == state, iteration
