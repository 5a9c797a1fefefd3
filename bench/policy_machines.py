"""Machines for the policy benchmark, built from the live measurements recorded in the repo.

One H200, SGLang 0.5.16, the synthetic Llama-3-8B-shaped pair (``bench/results/live``). Every
number comes from a results file; none is typed in here.

**Plain decode step** ``t_off(C)``, from the fixed-work runs of the plain-cost study
(``plain_cost_0.5.16/fixed_call1`` and ``fixed_call2``, ``sweep.jsonl``): each turn of the two
no-speculation servers (``base``, ``base+aa``) is one wave of ``C`` requests of 128 new tokens,
timed from the first sent to the last answered (``work_s``). A wave is one prefill batch (the
first token) and 127 decode steps, so ``t_off(C) = (W(C) - p) / 127`` with ``W(C)`` the median
wave over the turns and ``p`` the time one prefill batch stalls decoding (below). The prompts'
own prefill work and the HTTP round trip are thereby spread over the steps.

**Speculative step** ``t_on(C)`` per draft, from every live sweep call that ran an EAGLE-3
server of that draft beside ``base`` (``sweep/call*/sweep.jsonl``; time windows, closed loop):
``r``, the EAGLE-3 server's tokens/s over ``base``'s at the level (means over the call's turns),
and ``A``, its tokens per verify. In a closed loop a finished request is replaced at once and
its prefill batch stalls decoding for ``p``; a step of ``C`` requests making ``a`` tokens each
finishes ``C a / 128`` requests, and so runs into ``1 - exp(-C a / 128)`` prefill batches, except
where all requests finish together (one length, no speculation: one batch a wave, ``1 / 128`` a
step). So a request's time per step is ``t + b p`` in either state and
``t_on = A (t_off + b_off p) / r - b_on p``. Each call gives ``log(t_on / t_off)`` at each level;
a draft's curve is their mean over its calls (each call one vote).

**``p``** is fitted: one value for all levels and drafts (a grid from 0 to 30 ms), the one that
makes the calls of each draft agree best (least squares of ``log(t_on / t_off)`` around the
draft's mean at each level). The calls with one length and those with lengths spread 64-192
disagree without it (the README's "the crossover moves with the load"): one length in a closed
loop charges EAGLE-3 a prefill batch most steps and no speculation one a wave.

**Thin data**, reported with the derivation (``derivation_rows``): the good draft (``high``) has
17 calls, the poor one (``low``) 2 (calls 1 and 6), the fair one (``mid``) 1 (call 7; the
benchmarks' ``a25`` is then fitted to the live waves of the crossover plan, ``policy_fit.py``,
since this one call misplaced its crossover by a factor of two); levels are
powers of two only, and :class:`Curve` interpolates linearly in batch size between them (a wave
whose batch shrinks spends its steps in between); contexts reach 192 tokens in the measurements,
256 in the spread shape. The plan's drafts (``crossover-fixed.toml``: ``a34``, ``a25``, ``a12``)
take the step times of the recorded draft of the nearest accept length and accept each draft
token with their own probability ``q``.

**Host noise between turns** (:class:`TurnNoise`): the A/A pairs of the same fixed-work runs
(``base``/``base+aa`` and the two ``plainoff-a25`` servers), per level, give
``log(W_b / W_a) / sqrt(2)`` per turn: one server's turn-to-turn factor, drawn with either sign.
"""

from __future__ import annotations

import json
import math
import random
import re
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from live.stored_results import open_text  # bench/live: sweep.jsonl plain or gzipped

ROOT = Path(__file__).resolve().parents[1]
LIVE = ROOT / "bench" / "results" / "live"
FIXED_RUNS = (
    LIVE / "plain_cost_0.5.16" / "fixed_call1",
    LIVE / "plain_cost_0.5.16" / "fixed_call2",
)
SWEEP = LIVE / "sweep"
CARD = "H200"  # the card of every measurement the machines rest on
LAYERS = 32  # and the synthetic target's depth (the plans' models.layers default)


def on_the_card(run: Path) -> bool:
    """Whether a stored call ran on :data:`CARD` with the :data:`LAYERS`-layer target: its
    ``device.json`` (``{"card": ...}``, written where a call ran on another card) names it, or
    it has none (every call before the first on another card ran on an H200), and its
    ``models.json`` says that depth, or it has none (calls 49-53 ran the H200 at 24 layers)."""
    found, models = run / "device.json", run / "models.json"
    if found.exists() and CARD not in str(json.loads(found.read_text()).get("card", "")):
        return False
    return not models.exists() or json.loads(models.read_text()).get("layers", LAYERS) == LAYERS


PLAN = ROOT / "bench" / "live" / "plans" / "crossover-fixed.toml"
NO_SPEC = ("base", "base+aa")  # the no-speculation servers of the fixed-work runs
AA_PAIRS = (("base", "base+aa"), ("plainoff-a25", "plainoff-a25+2"))
NEW_TOKENS = 128  # every request of the fixed-work runs and of the one-length sweeps
DRAFT_STEPS = 3  # EAGLE-3 as the live servers ran it: 3 draft steps, top-k 1
EAGLE3 = re.compile(r"eagle3-(?P<draft>[a-z]+)")
PREFILL_GRID_S = tuple(i * 0.00025 for i in range(121))  # 0 to 30 ms


@dataclass(frozen=True)
class Curve:
    """Seconds by batch size through measured ``points`` (batch size, seconds), linear between
    them and along the nearest segment beyond (never below half the smallest point)."""

    points: tuple[tuple[int, float], ...]

    def at(self, batch_size: float) -> float:
        pts = self.points
        if len(pts) == 1:
            return pts[0][1]
        i = next((k for k, (x, _) in enumerate(pts) if x >= batch_size), len(pts) - 1)
        i = max(1, i)
        (x0, y0), (x1, y1) = pts[i - 1], pts[i]
        value = y0 + (y1 - y0) * (batch_size - x0) / (x1 - x0)
        return max(value, min(y for _, y in pts) / 2)


@dataclass(frozen=True)
class LiveMachine:
    """A plan's draft on the live machine: both states' step times by batch size, the prefill
    stall of a wave, and the share ``q`` of the tokens the draft knows (``source``: the
    recorded draft whose speculative step times it takes)."""

    draft: str
    source: str
    q: float
    off: Curve
    on: Curve
    prefill_s: float

    def seconds(self, batch_size: int, spec_on: bool) -> float:
        return (self.on if spec_on else self.off).at(batch_size)

    @property
    def accept_length(self) -> float:
        return accept_length(self.q)


def accept_length(q: float) -> float:
    """Mean tokens per verify of a draft that knows a share ``q`` of the tokens."""
    return sum(q**k for k in range(DRAFT_STEPS + 1))


@dataclass(frozen=True)
class TurnNoise:
    """Log factors of one server's turn, per level, as the A/A pairs showed them."""

    samples: Mapping[int, tuple[float, ...]]

    def factor(self, level: int, rng: random.Random) -> float:
        pool = self.samples.get(level) or tuple(x for v in self.samples.values() for x in v)
        return math.exp(rng.choice(pool)) if pool else 1.0

    def sd(self, level: int) -> float:
        pool = self.samples.get(level, ())
        return statistics.pstdev(pool) if len(pool) > 1 else 0.0


@dataclass(frozen=True)
class SlowTurns(TurnNoise):
    """The A/A pairs' turn noise, and one turn in ``every`` ``slow`` times slower besides: live
    on an H200 (call 49), a speculating server ran whole turns 1.5-1.9 times slower, one turn in
    seven at 16 requests (``policy_bench.py --slow-turns 1.8 7``)."""

    slow: float = 1.0
    every: int = 0

    def factor(self, level: int, rng: random.Random) -> float:
        found = super().factor(level, rng)
        return found * self.slow if self.every and rng.random() < 1.0 / self.every else found


@dataclass(frozen=True)
class WindowRatio:
    """One sweep call's EAGLE-3 server against ``base`` at one level."""

    call: str
    draft: str
    concurrency: int
    is_spread: bool
    ratio: float
    accept: float


def read_rows(run: Path) -> list[dict[str, object]]:
    """The measured rows (one a server, level and turn) of a run's ``sweep.jsonl``; warm-up
    turns (``"warmup": true``) left out, as the report leaves them."""
    with open_text(run / "sweep.jsonl") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [r for r in rows if "concurrency" in r and r.get("tok_per_s") and not r.get("warmup")]


def fixed_waves(runs: Iterable[Path]) -> dict[tuple[str, int], dict[tuple[str, int], float]]:
    """``work_s`` by (server, level), then (run, turn)."""
    out: dict[tuple[str, int], dict[tuple[str, int], float]] = defaultdict(dict)
    for run in runs:
        for r in read_rows(run):
            if "work_s" in r:
                key = (str(r["label"]), int(r["concurrency"]))  # type: ignore[call-overload]
                out[key][(run.name, int(r["rep"]))] = float(r["work_s"])  # type: ignore[arg-type]
    return out


def wave_seconds(waves: Mapping[tuple[str, int], Mapping[object, float]]) -> dict[int, float]:
    """The median fixed-work wave of the no-speculation servers, by level."""
    levels = sorted({c for label, c in waves if label in NO_SPEC})
    return {
        c: statistics.median(w for label in NO_SPEC for w in waves.get((label, c), {}).values())
        for c in levels
    }


def turn_noise(waves: Mapping[tuple[str, int], Mapping[tuple[str, int], float]]) -> TurnNoise:
    samples: dict[int, list[float]] = defaultdict(list)
    for a, b in AA_PAIRS:
        for (label, c), turns in waves.items():
            if label != a:
                continue
            other = waves.get((b, c), {})
            for turn, seconds in turns.items():
                if turn in other:
                    x = math.log(other[turn] / seconds) / math.sqrt(2)
                    samples[c] += [x, -x]
    return TurnNoise({c: tuple(v) for c, v in sorted(samples.items())})


def window_ratios(sweep: Path) -> list[WindowRatio]:
    """Every call's EAGLE-3 server against ``base``, per level (means over the call's turns)."""
    out = []
    calls = {p.parent for p in sweep.glob("call*/sweep.jsonl*")}
    for run in sorted(run for run in calls if on_the_card(run)):
        rates: dict[tuple[str, int], list[float]] = defaultdict(list)
        accepts: dict[tuple[str, int], list[float]] = defaultdict(list)
        spread = False
        for r in read_rows(run):
            key = (str(r["label"]), int(r["concurrency"]))  # type: ignore[call-overload]
            rates[key].append(float(r["tok_per_s"]))  # type: ignore[arg-type]
            if r.get("tokens_per_verify"):
                accepts[key].append(float(r["tokens_per_verify"]))  # type: ignore[arg-type]
            spread = spread or float(r.get("max_new_spread") or 0.0) > 0  # type: ignore[arg-type]
        for (label, c), mine in sorted(rates.items()):
            found = EAGLE3.fullmatch(label)
            if found and ("base", c) in rates and accepts[(label, c)]:
                ratio = statistics.fmean(mine) / statistics.fmean(rates[("base", c)])
                accept = statistics.fmean(accepts[(label, c)])
                out.append(WindowRatio(run.name, found["draft"], c, spread, ratio, accept))
    return out


def prefill_batches(concurrency: int, tokens: float, is_synchronised: bool) -> float:
    """Prefill batches per decode step in a closed loop whose steps make ``tokens`` tokens per
    request; ``is_synchronised``: all requests finish together (one length, no speculation)."""
    if is_synchronised:
        return tokens / NEW_TOKENS
    return 1.0 - math.exp(-concurrency * tokens / NEW_TOKENS)


def log_step_ratio(w: WindowRatio, t_off: float, prefill_s: float) -> float | None:
    """``log(t_on / t_off)`` from one call at one level; None where the model gives no step."""
    b_off = prefill_batches(w.concurrency, 1.0, is_synchronised=not w.is_spread)
    b_on = prefill_batches(w.concurrency, w.accept, is_synchronised=False)
    t_on = w.accept * (t_off + b_off * prefill_s) / w.ratio - b_on * prefill_s
    return math.log(t_on / t_off) if t_on > 0 and t_off > 0 else None


def step_off(waves: Mapping[int, float], prefill_s: float) -> dict[int, float]:
    return {c: (w - prefill_s) / (NEW_TOKENS - 1) for c, w in waves.items()}


def spec_logs(
    ratios: Sequence[WindowRatio], t_off: Mapping[int, float], prefill_s: float
) -> dict[tuple[str, int], list[float]] | None:
    """``log(t_on / t_off)`` of every call, by (draft, level); None if one has no step."""
    out: dict[tuple[str, int], list[float]] = defaultdict(list)
    for w in ratios:
        if w.concurrency not in t_off:
            continue
        x = log_step_ratio(w, t_off[w.concurrency], prefill_s)
        if x is None:
            return None
        out[(w.draft, w.concurrency)].append(x)
    return out


def disagreement(logs: Mapping[tuple[str, int], Sequence[float]]) -> float:
    return math.fsum(
        (x - statistics.fmean(xs)) ** 2 for xs in logs.values() for x in xs if len(xs) > 1
    )


def fit_prefill_s(ratios: Sequence[WindowRatio], waves: Mapping[int, float]) -> float:
    """The prefill stall that makes each draft's calls agree best (see the module docstring)."""
    scored = []
    for p in PREFILL_GRID_S:
        logs = spec_logs(ratios, step_off(waves, p), p)
        if logs is not None and all(v > 0 for v in step_off(waves, p).values()):
            scored.append((disagreement(logs), p))
    return min(scored)[1]


@dataclass(frozen=True)
class Derivation:
    """What the machines were built from: the fitted prefill stall, the plain step by level,
    the speculative steps' log ratios by (recorded draft, level), each draft's accept length."""

    prefill_s: float
    t_off: Mapping[int, float]
    logs: Mapping[tuple[str, int], tuple[float, ...]]
    accepts: Mapping[str, float]
    calls: Mapping[str, tuple[str, ...]]


def derive(
    fixed_runs: Sequence[Path] = FIXED_RUNS, sweep: Path = SWEEP, prefill_s: float | None = None
) -> tuple[Derivation, TurnNoise]:
    """The step times of both states from the recorded runs (``prefill_s``: fitted if None)."""
    waves = fixed_waves(fixed_runs)
    medians = wave_seconds(waves)
    ratios = window_ratios(sweep)
    p = fit_prefill_s(ratios, medians) if prefill_s is None else prefill_s
    t_off = step_off(medians, p)
    logs = spec_logs(ratios, t_off, p)
    if logs is None:
        raise ValueError(f"a prefill stall of {p} s leaves a speculative step <= 0")
    drafts = sorted({w.draft for w in ratios})
    accepts = {d: statistics.fmean(w.accept for w in ratios if w.draft == d) for d in drafts}
    calls = {
        d: tuple(sorted({w.call for w in ratios if w.draft == d}, key=_call_number)) for d in drafts
    }
    frozen = {k: tuple(v) for k, v in sorted(logs.items())}
    return Derivation(p, t_off, frozen, accepts, calls), turn_noise(waves)


def read_plan(plan: Path = PLAN) -> dict[str, Any]:
    """The crossover plan's TOML (``load``, ``schedule``, ``models``, ...)."""
    with open(plan, "rb") as f:
        return tomllib.load(f)


def plan_drafts(plan: Mapping[str, Any]) -> dict[str, float]:
    """The plan's drafts: name -> the share ``q`` of the tokens each knows."""
    return {str(k): float(v) for k, v in plan["models"]["accept"].items()}


def build_machines(derivation: Derivation, drafts: Mapping[str, float]) -> list[LiveMachine]:
    """One machine per plan draft: the plain step, and the speculative step of the recorded
    draft nearest in accept length."""
    off = Curve(tuple(sorted(derivation.t_off.items())))
    out = []
    for name, q in sorted(drafts.items(), key=lambda kv: -kv[1]):
        want = accept_length(q)
        source = min(derivation.accepts, key=lambda d: abs(derivation.accepts[d] - want))
        points = tuple(
            (c, derivation.t_off[c] * math.exp(statistics.fmean(xs)))
            for (d, c), xs in sorted(derivation.logs.items())
            if d == source
        )
        out.append(LiveMachine(name, source, q, off, Curve(points), derivation.prefill_s))
    return out


def _call_number(name: str) -> int:
    """``call12`` -> 12, so that calls sort as they were run."""
    digits = "".join(ch for ch in name if ch.isdigit())
    return int(digits) if digits else 0
