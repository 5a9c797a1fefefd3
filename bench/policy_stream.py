"""The policies on loads they were not tuned on: a continuous closed loop, steady or changing.

``policy_bench.py`` drives the policies through the crossover plan's fixed-work waves, the load
the live proof will send. A deployment sends something else: clients that each send their next
request as soon as the last one is answered (a closed loop), so requests finish and arrive at any
step, prefill batches of the newcomers interleave with the decode steps, and the number of
clients changes over the day. This module simulates that on the same machines
(``policy_machines.py``: step times of both states and the prefill stall measured live), with the
same servers (``policy_sim.Server``: the overlap scheduler's decision lag, host noise).

A load is a list of segments (:class:`Segment`): ``concurrency`` clients for ``seconds``. Each
scheduler iteration first prefills, in one batch, a request for every client without one (the
machine's ``prefill_s``; each newcomer's first token; the policy is shown the arrival,
``policy_sim.Server.arrive``, and a switch it decides there re-prefills the running requests in
a second batch), then runs one decode step of every request
in flight and, one step more, of those that ended on the step before (the overlap scheduler's,
``policy_waves.RIDE``: their tokens discarded, their clients' next requests sent after that
step); the hook times the first decode result after a prefill as an interrupted period (the
prefill's seconds and the step's: another batch ran in between). When the clients become fewer,
requests finish without being replaced. A request's
length and which of its tokens the draft knows are drawn from one stream per run, so every server
of a run serves the same requests in the same order (as far as its own speed takes it).

Lengths (:class:`Lengths`): ``spread``, 64-192 new tokens uniformly (the live sweeps' spread
shape), ``heavy``, log-normal around 128 (sigma 1, clipped to 4-1024: many short answers
and a few long ones, a chat service's shape, never measured live), and ``one``, every request
``tokens`` long (``ignore_eos``, as ``../shared/live-sglang/load.py`` sends them).

A segment may instead be *bounded* (``requests``): that many requests, at most ``concurrency``
in flight, and the segment lasts until the last is answered; the server is then idle until the
next (:func:`bounded`: ``load.py``'s levels, run back to back on one server).

The score: tokens made in a segment (by steps begun in it) over its seconds. For a steady load
(one segment after a warm-up segment at the same concurrency) each server's score relative to
the better of EAGLE-3 and no speculation in the same run: issue 21's bar is 0.97. For a changing
load, relative to the *oracle*: in each segment the better reference's tokens, summed (a switch
that costs nothing, made at each segment's start).

    python bench/policy_stream.py [--seeds 8] [--out bench/results]   # policy_stream.md / .csv
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from policy_machines import DRAFT_STEPS, LiveMachine
from policy_sim import Noise, Server
from policy_waves import RIDE, Request, decode_step
from sgtrace.payload.policy import Policy


@dataclass(frozen=True)
class Lengths:
    """How many new tokens a request asks for: ``name`` is ``spread``, ``heavy`` or ``one``
    (every request ``tokens``)."""

    name: str
    tokens: int = 128

    def draw(self, rng: random.Random) -> int:
        if self.name == "spread":
            return round(self.tokens * (1 + rng.uniform(-0.5, 0.5)))
        if self.name == "heavy":
            return min(8 * self.tokens, max(4, round(self.tokens * math.exp(rng.gauss(0.0, 1.0)))))
        if self.name == "one":
            return self.tokens
        raise ValueError(f"unknown lengths {self.name!r}: use 'spread', 'heavy' or 'one'")


SPREAD = Lengths("spread")
HEAVY = Lengths("heavy")


@dataclass(frozen=True)
class Segment:
    """``concurrency`` clients for ``seconds``, or, ``requests`` above 0, until that many
    requests are answered; ``scored``: part of the result (not a warm-up); ``tokens`` above 0:
    every request of the segment that long, not drawn from the load's lengths (a live turn's
    warm-up wave of short requests)."""

    concurrency: int
    seconds: float
    scored: bool = True
    requests: int = 0
    tokens: int = 0


@dataclass(frozen=True)
class StreamLoad:
    """A named sequence of segments with one length distribution; ``steady``: a single
    concurrency (scored against the better reference) rather than a changing one (the oracle)."""

    name: str
    segments: tuple[Segment, ...]
    lengths: Lengths
    steady: bool


def steady(concurrency: int, lengths: Lengths, seconds: float, warmup_s: float) -> StreamLoad:
    """``concurrency`` clients throughout: a warm-up segment, then the scored one."""
    segments = (Segment(concurrency, warmup_s, scored=False), Segment(concurrency, seconds))
    return StreamLoad(f"c={concurrency}", segments, lengths, True)


def changing(name: str, levels: Sequence[int], lengths: Lengths, seconds: float) -> StreamLoad:
    """The clients change every ``seconds`` through ``levels``; every segment is scored."""
    return StreamLoad(name, tuple(Segment(c, seconds) for c in levels), lengths, False)


def bounded(levels: Sequence[tuple[int, int]], lengths: Lengths) -> StreamLoad:
    """``load.py``'s run up to its last level, the one scored: first 8 requests at 8 in flight
    (its warm-up), then each ``(concurrency, requests)`` of ``levels`` in turn, bounded."""
    warmup = Segment(8, 0.0, scored=False, requests=8)
    *before, (concurrency, requests) = levels
    earlier = tuple(Segment(c, 0.0, scored=False, requests=n) for c, n in before)
    last = Segment(concurrency, 0.0, requests=requests)
    return StreamLoad(f"b={concurrency}", (warmup, *earlier, last), lengths, True)


@dataclass(frozen=True)
class SegmentResult:
    """One server in one segment: tokens made, seconds run, decode steps, steps speculating,
    toggles decided."""

    tokens: int
    seconds: float
    steps: int
    on_steps: int
    toggles: int


@dataclass
class _InFlight:
    request: Request
    made: int


@dataclass
class _Loop:
    server: Server
    machine: LiveMachine
    noise: Noise
    rng: random.Random
    requests: Iterator[Request]
    flight: list[_InFlight] = field(default_factory=list)
    riding: int = 0  # requests that ended on the step before: in the next batch still
    clock: float = 0.0

    def admit(self, clients: int, limit: int | None = None) -> tuple[int, float]:
        """Prefill a request for every client without one (``limit``: at most that many):
        tokens made, seconds taken."""
        missing = clients - len(self.flight) - self.riding  # riding: its answer not sent yet
        missing = missing if limit is None else min(missing, limit)
        if missing <= 0:
            return 0, 0.0
        running = len(self.flight)
        newcomers = [_InFlight(next(self.requests), 1) for _ in range(missing)]
        self.flight += [f for f in newcomers if f.made < f.request.tokens]
        lengths = [f.request.tokens for f in newcomers]
        self.server.arrive(running + missing, missing, lengths)  # a switch: the server's cost
        seconds = self.machine.prefill_s * self.rng.lognormvariate(0.0, self.noise.sigma)
        self.clock += seconds
        return missing, seconds

    def decode(self, before_s: float) -> tuple[int, bool, bool]:
        """One decode step of every request in flight after ``before_s`` seconds of a prefill
        (0: none): tokens made, whether it speculated, whether the policy toggled on its result."""
        flight = [(f.request, f.made) for f in self.flight]
        step, gains = decode_step(
            self.server,
            self.machine,
            flight,
            self.noise,
            self.rng,
            before_s=before_s,
            riding=self.riding,
        )
        made = 0
        for f, g in zip(self.flight, gains, strict=True):
            g = min(g, f.request.tokens - f.made)
            f.made += g
            made += g
        running = len(self.flight)
        self.flight = [f for f in self.flight if f.made < f.request.tokens]
        self.riding = (running - len(self.flight)) * RIDE
        self.clock += step.seconds
        return made, step.ran_on, step.decision.changed


def request_stream(lengths: Lengths, q: float, rng: random.Random) -> Iterator[Request]:
    """Requests without end: lengths from ``lengths``, each token known to the draft with
    chance ``q`` (as ``policy_waves.turn_requests`` draws them)."""
    while True:
        n = lengths.draw(rng)
        yield Request(n, tuple(rng.random() < q for _ in range(n + DRAFT_STEPS)))


def run_stream(
    policy: Policy, machine: LiveMachine, load: StreamLoad, seed: int, noise: Noise, name: str
) -> list[SegmentResult]:
    """One server through ``load``: a result per scored segment. ``name`` seeds the server's
    own draws (host noise); the requests are the run's (``seed``)."""
    drawn = random.Random(f"{seed}/requests")  # one stream of requests, whatever their lengths
    requests = request_stream(load.lengths, machine.q, drawn)
    server = Server(policy, launched_on=getattr(policy, "spec_on", True))  # a Constant's state
    loop = _Loop(server, machine, noise, random.Random(f"{seed}/{name}"), requests)
    out = []
    for segment in load.segments:
        fixed = Lengths("one", segment.tokens)
        loop.requests = request_stream(fixed, machine.q, drawn) if segment.tokens else requests
        start, end = loop.clock, loop.clock + segment.seconds
        tokens = steps = on_steps = toggles = 0
        left = segment.requests  # bounded: requests not yet admitted
        while (left or loop.flight or loop.riding) if segment.requests else loop.clock < end:
            made, prefill_s = loop.admit(segment.concurrency, left if segment.requests else None)
            tokens += made
            left = max(0, left - made)
            if not loop.flight and not loop.riding:
                continue
            made, ran_on, toggled = loop.decode(prefill_s)
            tokens, steps = tokens + made, steps + 1
            on_steps, toggles = on_steps + ran_on, toggles + toggled
        if segment.requests:
            server.settle()  # drained: idle until the next segment's requests
        if segment.scored:
            out.append(SegmentResult(tokens, loop.clock - start, steps, on_steps, toggles))
    return out


def rate(results: Sequence[SegmentResult]) -> float:
    """Tokens per second over ``results``."""
    return sum(r.tokens for r in results) / sum(r.seconds for r in results)


def relative_rates(
    runs: Mapping[str, Sequence[SegmentResult]], references: Sequence[str], steady_load: bool
) -> dict[str, float]:
    """Each server's tokens per second relative to the better reference (``steady_load``)
    or to the oracle (per segment the better reference's rate, over the whole load's time)."""
    if steady_load:
        best = max(rate(runs[name]) for name in references)
        return {name: rate(rs) / best for name, rs in runs.items()}
    segments = range(len(runs[references[0]]))
    oracle_tokens = sum(
        max(runs[n][i].tokens / runs[n][i].seconds for n in references)
        * runs[references[0]][i].seconds
        for i in segments
    )
    oracle_seconds = sum(runs[references[0]][i].seconds for i in segments)
    oracle = oracle_tokens / oracle_seconds
    return {name: rate(rs) / oracle for name, rs in runs.items()}


def simulate(
    machine: LiveMachine,
    load: StreamLoad,
    seeds: Sequence[int],
    servers: Mapping[str, Callable[[], Policy]],
    references: Sequence[str],
    noise: Noise,
) -> dict[str, list[tuple[float, float, float]]]:
    """Per server, per seed: (relative rate, share of steps speculating, toggles a second)."""
    out: dict[str, list[tuple[float, float, float]]] = {name: [] for name in servers}
    for seed in seeds:
        runs = {
            name: run_stream(make(), machine, load, seed, noise, name)
            for name, make in servers.items()
        }
        relative = relative_rates(runs, references, load.steady)
        for name, rs in runs.items():
            steps = sum(r.steps for r in rs) or 1
            seconds = sum(r.seconds for r in rs)
            out[name].append(
                (
                    relative[name],
                    sum(r.on_steps for r in rs) / steps,
                    sum(r.toggles for r in rs) / seconds,
                )
            )
    return out
