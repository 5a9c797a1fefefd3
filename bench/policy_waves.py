"""The live crossover plan's fixed-work turns, as one server sees them, on a simulated machine.

What ``bench/live/sweep.sh`` with ``plans/crossover-fixed.toml`` sends each server
(``sweep_load.py``, ``sweep_fixed.py``): first the greedy check (16 prompts of 48 new tokens one
at a time, then the 16 at once); then, level by level (1, 2, 4, ..., 128), ``reps`` turns, each a
warm-up wave of ``C`` requests of 4 new tokens and a wave of ``C`` requests of 128 (one length) or
64-192 new tokens (the spread shape: the batch shrinks as requests finish), each wave prefilled
in one batch. Only the second wave is timed, from its prefill to its last token. Between turns
the server is idle (the other servers take theirs), so decisions in flight settle.

A wave here: the prefill (the first token of every request; the machine's ``prefill_s``), then
decode steps of the requests not yet done (:class:`~policy_sim.Server`: the decision lag, the
host noise of each step); the first result after a prefill is untimed, as the hook's
``forward_iter`` check makes it. The synthetic draft knows a fixed share ``q`` of the tokens, and
a request's tokens follow from its prompt, so which of its tokens the draft knows is fixed per
request (:class:`Request`): speculating, a request makes 1 token plus the draft tokens it knows
in a row (up to 3), and the hook sees those accept lengths; off, one token. A turn's requests
(lengths and known tokens) are the same for every server, as ``sweep_fixed.py`` sends every
server the same prompts in a turn. A turn's steps are all stretched by one factor drawn from the
A/A pairs (:class:`~policy_machines.TurnNoise`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from policy_machines import DRAFT_STEPS, LiveMachine, TurnNoise
from policy_sim import Noise, Server, Step
from sgtrace.payload.policy import Policy

WARMUP_TOKENS = 4  # sweep_fixed.FIXED_WARMUP_TOKENS
IDLE_S = 2.0  # before a turn's first wave: the other servers' turns (seconds, at the least)
ROUND_TRIP_S = 0.002  # between a turn's two waves: the client's answer and next request
# A request that ends on a step runs once more in the next, its tokens discarded: SGLang's
# overlap scheduler launches a batch before the result of the one before is processed. Live, in
# every wave of bench/results/live/sweep/call61's trace a result's batch held the requests that
# ended on the result before, and the longest request's wave took one result more than its
# length; the hook sees them in its batch sizes (payload/tail.py: OVERLAP)
RIDE = 1
GREEDY_PROMPTS, GREEDY_TOKENS = 16, 48  # sweep_load.py's greedy check (--greedy 16)


@dataclass(frozen=True)
class Shape:
    """A load shape: request lengths ``max_new`` spread by up to ``spread`` either way."""

    name: str
    spread: float


ONE_LENGTH = Shape("one length", 0.0)
SPREAD = Shape("spread", 0.5)  # crossover-fixed.toml: "the spread shape: 0.5 (64-192 new tokens)"


@dataclass(frozen=True)
class Load:
    """The plan's levels, turns per level and request length."""

    levels: tuple[int, ...]
    reps: int
    max_new: int = 128
    has_greedy: bool = True


@dataclass(frozen=True)
class Wave:
    """One timed wave: seconds, decode steps, steps run speculating, toggles decided."""

    level: int
    rep: int
    seconds: float
    steps: int
    on_steps: int
    toggles: int


@dataclass(frozen=True)
class Request:
    """A request's new tokens and, per token, whether the draft knows it."""

    tokens: int
    known: tuple[bool, ...]


def turn_requests(
    count: int, tokens: int, spread: float, q: float, rng: random.Random
) -> list[Request]:
    """``count`` requests of ``tokens`` new tokens spread by up to ``spread`` either way (as
    ``sweep_requests.new_tokens`` spreads them), the draft knowing each token with chance ``q``."""
    out = []
    for _ in range(count):
        n = max(1, round(tokens * (1 + rng.uniform(-spread, spread)))) if spread > 0 else tokens
        out.append(Request(n, tuple(rng.random() < q for _ in range(n + DRAFT_STEPS))))
    return out


@dataclass(frozen=True)
class Run:
    """One simulated live run of a draft and a shape: the machine, the plan's load, the seed
    of its requests, the host noise of each step and between turns (``turns`` None: none)."""

    machine: LiveMachine
    load: Load
    shape: Shape
    seed: int
    noise: Noise
    turns: TurnNoise | None


@dataclass
class _Waves:
    server: Server
    machine: LiveMachine
    noise: Noise
    rng: random.Random

    def wave(
        self, requests: Sequence[Request], turn: float = 1.0, idle_s: float = IDLE_S
    ) -> tuple[float, int, int, int]:
        """Prefill and decode one wave after ``idle_s`` idle seconds; seconds, steps,
        speculative steps, toggles. The wave's first result is an interrupted period to the
        hook (the idle time, the prefill and the step)."""
        machine = self.machine
        scale = turn / self.noise.mean()
        seconds = machine.prefill_s * turn
        made = {i: 1 for i, r in enumerate(requests) if r.tokens > 1}  # the prefill's token
        lengths = [r.tokens for r in requests]
        toggles = int(self.server.arrive(len(made), len(requests), lengths))  # idle: no re-prefill
        steps = on_steps = riding = 0
        while made or riding:
            step, gains = decode_step(
                self.server,
                machine,
                [(requests[i], n) for i, n in made.items()],
                self.noise,
                self.rng,
                scale,
                before_s=0.0 if steps else idle_s + machine.prefill_s * turn,
                riding=riding,
            )
            grown = {i: n + g for (i, n), g in zip(made.items(), gains, strict=True)}
            made = {i: n for i, n in grown.items() if n < requests[i].tokens}
            riding = (len(grown) - len(made)) * RIDE  # ended: in the next batch still
            seconds += step.seconds
            steps += 1
            on_steps += step.ran_on
            toggles += step.decision.changed
        self.server.settle()  # idle: the next wave starts in the latest decision
        return seconds, steps, on_steps, toggles


def decode_step(
    server: Server,
    machine: LiveMachine,
    flight: Sequence[tuple[Request, int]],
    noise: Noise,
    rng: random.Random,
    scale: float = 1.0,
    before_s: float = 0.0,
    riding: int = 0,
) -> tuple[Step, list[int]]:
    """One decode step of the requests in ``flight`` (each with the tokens it has made): the
    step, and the tokens each gains (speculating: 1 and the draft tokens it keeps; off: 1).
    ``scale`` and ``before_s`` as :meth:`~policy_sim.Server.step` takes them; ``riding``
    requests that ended on the step before run in the batch too, their tokens discarded
    (:data:`RIDE`), a verify's mean accept length each."""
    kept: list[int] = []

    def verify(ran_on: bool) -> tuple[float, ...] | None:
        if not ran_on:
            return None
        kept[:] = [kept_tokens(request.known, made) for request, made in flight]
        accepts = tuple(float(k + 1) for k in kept)
        mean = sum(accepts) / len(accepts) if accepts else 1.0
        return accepts + (mean,) * riding

    size = len(flight) + riding
    step = server.step(machine, size, verify, noise, rng, scale, before_s=before_s)
    return step, [k + 1 for k in kept] if step.ran_on else [1] * len(flight)


def kept_tokens(known: tuple[bool, ...], made: int) -> int:
    """Draft tokens a verify keeps: those the draft knows in a row after ``made`` tokens."""
    count = 0
    while count < DRAFT_STEPS and known[made + count]:
        count += 1
    return count


def run_server(policy: Policy, run: Run, name: str) -> list[Wave]:
    """One server through the whole plan: its timed waves, level by level, turn by turn.
    ``name`` seeds its own random draws (acceptance, noise)."""
    rng = random.Random(f"{run.seed}/{name}")
    waves = _Waves(Server(policy), run.machine, run.noise, rng)
    q, load = run.machine.q, run.load

    def common(key: str) -> random.Random:  # the same requests for every server of a run
        return random.Random(f"{run.seed}/{key}")

    if load.has_greedy:
        prompts = turn_requests(GREEDY_PROMPTS, GREEDY_TOKENS, 0.0, q, common("greedy"))
        for i, request in enumerate(prompts):
            waves.wave([request], idle_s=ROUND_TRIP_S if i else IDLE_S)
        waves.wave(prompts, idle_s=ROUND_TRIP_S)
    out = []
    for level in load.levels:
        for rep in range(1, load.reps + 1):
            turn = run.turns.factor(level, rng) if run.turns is not None else 1.0
            requests = common(f"{level}/{rep}")
            waves.wave(turn_requests(level, WARMUP_TOKENS, 0.0, q, requests), turn)
            wave = turn_requests(level, load.max_new, run.shape.spread, q, requests)
            out.append(Wave(level, rep, *waves.wave(wave, turn, ROUND_TRIP_S)))
    return out
