"""How each speculation policy does on loads it was not tuned on: closed loops, steady or changing.

The loads (``policy_stream.py`` simulates them on the machines of ``policy_machines.py``):

* **steady**, 1-128 clients, each sending its next request when the last is answered, lengths
  ``spread`` (64-192 new tokens) or ``heavy`` (log-normal around 128, 4-1024): a fresh server,
  a warm-up, then the scored seconds; each policy against the better of EAGLE-3 and no
  speculation in the same run (issue 21's bar: 0.97).
* **changing** (scored against the oracle: per segment the better reference): ``ramp``, the
  clients doubling from 1 to 128 and halving back, a few seconds each; ``bursts``, 8 and 96
  clients alternating every two seconds (a batch that swings across the crossover faster than
  a probe's spacing); ``swing``, 4 and 48 clients alternating every 15 seconds.
* **bounded** (``b=C``, lengths ``one``: 64 new tokens each), what ``../shared/live-sglang/
  load.py`` sends with its defaults extended to 1-128: a warm-up of 8 requests, then levels of
  a fixed number of requests (8 at 1 in flight, 32 at 8, 128 at 64: its defaults; 2C or at
  least 8 between), C in flight, back to back on one server, each level ending when its last
  request is answered; level C scored against the better reference over that level. Short:
  at 64 in flight a level is two requests per client, some 100 decode steps, so what a policy
  spends finding the better state there counts in full.

Policies as in ``policy_bench.py``: ``calibrated`` (the default), ``threshold`` and
``threshold-24``, ``calibrated (steps only)``: the calibrated policy fed no interrupted
periods (the decode results after a prefill), as the hook fed it before it told them apart, and
``calibrated (seeded)``: the calibrated policy starting with both states' decode steps at every
batch-size bucket measured (``policy_sim.seeded``), what a calibration at start-up would give
it (not built: the row says what building it would buy), and ``calibrated (results only)``:
the calibrated policy asked on decode results only, not when requests arrive
(``policy_sim.OnResults``), as the hook called it before; references ``eagle3`` and
``no-spec``. Each seed one run; mean ± sd over runs.

    python bench/policy_stream_bench.py [--seeds 6] [--out bench/results]
    python bench/policy_stream_bench.py --quick --out /tmp/stream     # a small case, for a test
"""

from __future__ import annotations

import argparse
import csv
import io
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from policy_bench import REFERENCES, STEP_NOISE, policy_configs
from policy_fit import live_machines
from policy_machines import ROOT, LiveMachine
from policy_report import BAR
from policy_sim import Constant, OnResults, StepsOnly, seeded
from policy_stream import (
    HEAVY,
    SPREAD,
    Lengths,
    StreamLoad,
    bounded,
    changing,
    simulate,
    steady,
)
from sgtrace.payload.policies import make_policy
from sgtrace.payload.policy import Policy

LEVELS = (1, 2, 4, 8, 16, 32, 64, 128)
QUICK_LEVELS = (1, 128)
RAMP = (1, 2, 4, 8, 16, 32, 64, 128, 64, 32, 16, 8, 4, 2, 1)
STEPS_ONLY = "calibrated (steps only)"  # the calibrated policy blind to interrupted periods
# the calibrated policy knowing both states' decode steps at every bucket from the start
SEEDED = "calibrated (seeded)"
ON_RESULTS = "calibrated (results only)"  # not shown arrivals: the default before they were
ONE_64 = Lengths("one", 64)  # load.py's default: --max-new 64, ignore_eos
BOUNDED = ((1, 8), (2, 8), (4, 16), (8, 32), (16, 64), (32, 128), (64, 128), (128, 256))


def loads(quick: bool, lengths: Lengths) -> list[StreamLoad]:
    """The steady loads and the changing ones, for one length distribution."""
    if quick:
        return [steady(c, lengths, 2.0, 1.0) for c in QUICK_LEVELS]
    out = [steady(c, lengths, 12.0, 3.0) for c in LEVELS]
    out.append(changing("ramp", RAMP, lengths, 4.0))
    out.append(changing("bursts", (8, 96) * 8, lengths, 2.0))
    out.append(changing("swing", (4, 48) * 3, lengths, 15.0))
    return out


def families(quick: bool) -> list[tuple[Lengths, list[StreamLoad]]]:
    """Each length distribution and its loads: the closed loops, then load.py's levels."""
    if quick:
        return [(SPREAD, loads(True, SPREAD))]
    levels = [bounded(BOUNDED[: i + 1], ONE_64) for i in range(len(BOUNDED))]
    return [(SPREAD, loads(False, SPREAD)), (HEAVY, loads(False, HEAVY)), (ONE_64, levels)]


@dataclass(frozen=True)
class Row:
    """One server on one load of one draft: per run, its relative rate, share of steps
    speculating and toggles a second."""

    draft: str
    accept: float
    lengths: str
    load: str
    steady: bool
    server: str
    runs: tuple[tuple[float, float, float], ...]

    @property
    def mean(self) -> float:
        return statistics.fmean(r[0] for r in self.runs)

    @property
    def sd(self) -> float:
        return statistics.stdev(r[0] for r in self.runs) if len(self.runs) > 1 else 0.0

    @property
    def on_share(self) -> float:
        return statistics.fmean(r[1] for r in self.runs)

    @property
    def toggles(self) -> float:
        return statistics.fmean(r[2] for r in self.runs)


def servers(machine: LiveMachine) -> dict[str, Callable[[], Policy]]:
    """Fresh policies by name for ``machine``: the compared ones, then the references."""
    configs = policy_configs()
    out: dict[str, Callable[[], Policy]] = {
        name: (lambda c=config: make_policy(c)) for name, config in configs.items()
    }
    out[STEPS_ONLY] = lambda: StepsOnly(make_policy(configs["calibrated"]))
    out[SEEDED] = lambda: seeded(configs["calibrated"], machine, LEVELS)
    out[ON_RESULTS] = lambda: OnResults(make_policy(configs["calibrated"]))
    for name, spec_on in REFERENCES.items():
        out[name] = lambda on=spec_on: Constant(on)
    return out


def render_csv(rows: Sequence[Row]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["draft", "accept", "lengths", "load", "against", "server", "mean", "sd"])
    for r in rows:
        against = "better" if r.steady else "oracle"
        writer.writerow(
            [r.draft, f"{r.accept:.3f}", r.lengths, r.load, against, r.server]
            + [f"{r.mean:.4f}", f"{r.sd:.4f}"]
        )
    return out.getvalue()


def _tables(rows: Sequence[Row], value: Callable[[Row], str]) -> list[str]:
    """One table per set of loads (the closed loops' lengths share theirs; load.py's levels)."""
    names_of: dict[str, set[str]] = {}
    for r in rows:
        names_of.setdefault(r.lengths, set()).add(r.load)
    out: list[str] = []
    for names in dict.fromkeys(frozenset(n) for n in names_of.values()):
        out += [*([""] if out else []), *_table([r for r in rows if r.load in names], value)]
    return out


def _table(rows: Sequence[Row], value: Callable[[Row], str]) -> list[str]:
    names = list(dict.fromkeys(r.load for r in rows))
    index = {(r.draft, r.lengths, r.server, r.load): r for r in rows}
    lines = [
        "| draft (A) | lengths | server | " + " | ".join(names) + " |",
        "| --- | --- | --- | " + " | ".join("---:" for _ in names) + " |",
    ]
    for draft, lengths, server, accept in dict.fromkeys(
        (r.draft, r.lengths, r.server, r.accept) for r in rows
    ):
        cells = [index.get((draft, lengths, server, n)) for n in names]
        texts = ["" if c is None else value(c) for c in cells]
        lines.append(
            f"| {draft} ({accept:.2f}) | {lengths} | {server} | " + " | ".join(texts) + " |"
        )
    return lines


def _relative(row: Row) -> str:
    text = f"{row.mean:.3f} ± {row.sd:.3f}"
    return f"**{text}**" if row.mean < BAR else text


def render_markdown(rows: Sequence[Row], command: str, seeds: int) -> str:
    policies = [r for r in rows if r.server not in REFERENCES]
    below = [r for r in policies if r.mean < BAR]
    lines = [
        "# Policy benchmark: closed-loop loads the policies were not tuned on (simulated)",
        "",
        f"    {command}",
        "",
        "Generated by `bench/policy_stream_bench.py` (the method: its docstring and "
        "`policy_stream.py`'s; the machines: `policy.md`). Tokens per second relative to the "
        "better of EAGLE-3 and no speculation in the same run (`c=N`: N clients throughout; "
        "`b=N`: load.py's level of N in flight, lengths `one`, after its earlier levels) or "
        "to the oracle (`ramp`, `bursts`, `swing`: per segment the better one); "
        f"below {BAR} in bold. {seeds} runs per case, mean ± sd.",
        "",
        "## Relative tokens per second",
        "",
        *_tables(rows, _relative),
        "",
        "## Share of decode steps run speculating",
        "",
        *_tables([r for r in rows if r.server != "no-spec"], lambda r: f"{r.on_share:.2f}"),
        "",
        "## Toggles a second (policies)",
        "",
        *_tables(policies, lambda r: f"{r.toggles:.1f}"),
        "",
        "## Below the bar",
        "",
    ]
    if not below:
        lines.append(f"No policy's mean is below {BAR}.")
    for r in below:
        lines.append(f"- {r.server}, {r.draft}, {r.lengths}, {r.load}: {r.mean:.3f} ± {r.sd:.3f}")
    return "\n".join([*lines, ""])


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=6, help="simulated runs per case")
    p.add_argument("--quick", action="store_true", help="2 seeds, 1 and 128 clients, a34, spread")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    a = parse_args(argv)
    _, _, machines = live_machines()  # policy_fit.py: a draft with live waves fitted to them
    if a.quick:
        machines = [m for m in machines if m.draft == "a34"]
    seeds = tuple(range(1, (2 if a.quick else a.seeds) + 1))
    rows = []
    for machine in machines:
        made = servers(machine)
        for lengths, family in families(a.quick):
            for load in family:
                found = simulate(machine, load, seeds, made, tuple(REFERENCES), STEP_NOISE)
                for name, runs in found.items():
                    rows.append(
                        Row(
                            machine.draft,
                            machine.accept_length,
                            lengths.name,
                            load.name,
                            load.steady,
                            name,
                            tuple(runs),
                        )
                    )
            print(f"{machine.draft} {lengths.name}: done", file=sys.stderr)
    command = "python bench/policy_stream_bench.py" + (
        " --quick" if a.quick else f" --seeds {a.seeds}"
    )
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "policy_stream.csv").write_text(render_csv(rows))
    (a.out / "policy_stream.md").write_text(render_markdown(rows, command, len(seeds)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
