"""The speculation hook inside SGLang's processes: decide after each decode result, switch
before the next launch.

``--mode runtime``: :mod:`.boot` calls :func:`install` in every process; the import patcher
wraps the decide and attach sites when SGLang imports them, and :func:`uninstall` undoes it all.
``--mode patch``: SGLang's patched source calls :func:`attach` and :func:`on_decode_result`,
and the hook installs itself on first use from the config beside this package.

On every release (docs/hook-mechanism.md) :func:`attach` readies the plain off state
(:class:`~.plainoff.PlainOffSwitch`, wired by :mod:`.plainsites`): off runs the scheduler's
plain decode path. :func:`on_decode_result` lets the policy decide, from facts all ranks share
(or on one rank, the decision carried to the others: :mod:`.carry`), records the decision
(:class:`~.record.DecisionLog`) and logs toggles; the switch runs at the scheduler's next
prefill scheduling. A policy that decides on arrivals (the calibrated one) is also asked when
the requests received in a loop iteration grow the batch into a larger bucket
(:meth:`Hook.arrive`): that decision is applied in the same iteration, before their prefill.
Where upstream's own controller owns the switch (``--speculative-adaptive``) it records and logs
what the policy would do, and switches nothing.

Fail-safe: the hook never takes the server down nor flips it. A missing or damaged config logs
one line and leaves speculation as launched; any fault while deciding or switching logs once,
keeps the mode the worker runs, and stops deciding.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import sys
import time
from collections.abc import Callable
from typing import Any

from . import plainsites, registry
from .calibration import bucket_of
from .carry import DecisionCarrier
from .cohort import largest
from .config import Delivery, HookConfig, HookConfigError, config_path, read_config
from .costs import CostMeter
from .explain import decision_line
from .facts import accept_lengths, count_lengths, generate_requests, rank_of, unfinished
from .frozen import build
from .patcher import ImportPatcher, Wrapper
from .patcher import then as _then
from .plainoff import PlainOffSwitch
from .policies import make_policy
from .policy import Observation, PolicyKind, Reason
from .record import DecisionLog, DecisionRecord
from .switchcost import line_of
from .wave import wave_lengths

LOGGER = logging.getLogger("sgtrace_hook")


def install(path: str) -> Hook | None:
    """Install the hook configured by the JSON file ``path`` (idempotent); None when the config
    cannot be used (logged once; speculation then runs as launched)."""
    found = registry.lookup(registry.PluginKind.HOOK)
    if found is not None:
        return found if isinstance(found, Hook) else None
    try:
        config = read_config(path)
    except HookConfigError as exc:
        _disable(str(exc))
        return None
    hook = Hook(config)
    try:
        if config.delivery is Delivery.RUNTIME:
            hook.patch_on_import()
    except Exception as exc:  # never stop SGLang from starting: undo what was patched
        hook.close()
        _disable(f"cannot patch SGLang as it is imported: {exc!r}")
        return None
    registry.register(registry.PluginKind.HOOK, hook)
    return hook


def _disable(why: str) -> None:
    """Remember, and say once, that this process runs without the hook."""
    LOGGER.error("sgtrace-hook: disabled, speculation runs as launched: %s", why)
    registry.register(registry.PluginKind.HOOK, _Disabled())


def uninstall() -> None:
    """Undo :func:`install`: remove the import hook, restore patched functions and workers."""
    registry.uninstall(registry.PluginKind.HOOK)


def installed() -> Hook | None:
    """The hook installed in this process, if any."""
    return registry.installed(registry.PluginKind.HOOK, Hook)


def attach(worker: Any) -> None:
    """Site ``attach``: called with the speculative worker at the end of its ``__init__``."""
    hook = _current()
    if hook is not None:
        hook.guarded("attach", hook.attach, worker)


def on_decode_result(batch: Any, result: Any) -> None:
    """Site ``decide``: called after SGLang processed the result of a decode batch."""
    hook = _current()
    if hook is not None:
        hook.guarded("on_decode_result", hook.on_decode_result, batch, result)


def _current() -> Hook | None:
    if registry.lookup(registry.PluginKind.HOOK) is None:  # patch mode: install on first use
        return install(config_path())
    return installed()


class _Disabled:
    """Stands for a hook whose config could not be read, so that it is reported once."""

    def close(self) -> None:
        """Nothing was installed."""


class Hook:
    """The hook of one process: policy, counters, decisions, the plain off state, the patches."""

    def __init__(self, config: HookConfig) -> None:
        self.config = config
        self.policy = make_policy(config.policy)
        self.decisions = DecisionLog()
        self.timed = config.policy.reads_clock  # step periods, for a policy that reads them
        self.carrier = DecisionCarrier(self.apply_decisions, self.arrive)  # carry.py: one decides
        self.measure_level = logging.INFO if config.options.log_measurements else logging.DEBUG
        self.last_result: float | None = None
        self.last_iter: int | None = None  # the forward_iter of the last decode result
        self.step = 0
        self.running = 0  # requests unfinished after the latest decode result
        self.arrived = 0  # generation requests received since
        self.lengths: dict[int, int] = {}  # of those that finish by length, how many by length
        self.told = 0  # the bucket of the largest cohort told since (cohort.py)
        self.waved = False  # a wave told since (wave.py)
        self.last_batch = 0  # the batch size of the latest result or arrival decision
        self.spec_on = True
        self.reason: Reason | None = None  # the latest decision's: a tail's first is logged
        self.rank = -1
        self.plain: PlainOffSwitch | None = None
        self.worker: Any = None
        self.failed = False
        self.warned: set[str] = set()
        self.patcher = ImportPatcher()
        self.wrapped_sites: set[str] = set()  # qualnames wrapped in SGLang (plainsites.py checks)
        self.costs = CostMeter(self.log_cost)  # costs.py: the hook's seconds, and the collector's

    def patch_on_import(self) -> None:
        """Wrap the decide and attach sites when SGLang imports their modules."""
        for site, after in (
            (self.config.decide, _decide_after),
            (self.config.attach, _attach_after),
        ):
            self.patcher.watch(
                site.module, functools.partial(self.wrap_site, site.qualname, _then(after))
            )
        plainsites.watch(self)
        carry = functools.partial(self.carrier.install, self.patcher.patches, self.config.names)
        self.patcher.watch(self.config.names.receiver_module, carry)  # carry.py
        self.patcher.start()

    def wrap_site(self, qualname: str, wrapper: Wrapper, module: Any) -> None:
        if self.patcher.patches.wrap(module, qualname, wrapper):
            self.wrapped_sites.add(qualname)
        else:
            LOGGER.error(
                "sgtrace-hook: %s has no %s; the hook was generated for another release",
                module.__name__,
                qualname,
            )

    def close(self) -> None:
        self.patcher.stop()
        self.costs.stop()

    def log_cost(self, line: str) -> None:
        LOGGER.info("sgtrace-hook rank=%d cost: %s", self.rank, line)

    def guarded(self, where: str, site: Callable[..., None], *args: Any) -> None:
        """Run ``site``; a fault stops the hook instead of reaching SGLang."""
        if self.failed:
            return
        began, collected = time.perf_counter(), self.costs.collected_s
        try:
            site(*args)
        except Exception as exc:  # never take the server down; see fail()
            self.fail(where, exc)
        self.costs.add(time.perf_counter() - began, self.costs.collected_s - collected)

    def fail(self, where: str, exc: Exception) -> None:
        """Stop deciding and keep the mode the worker runs now. Logged once."""
        running = self.spec_on
        self.carrier.drop_pending()  # carry.py: what was not sent yet is never applied
        if self.plain is not None:
            self.plain.want_spec_on = running = self.plain.spec_on
        if not self.failed:
            self.failed = True
            LOGGER.error(
                "sgtrace-hook rank=%d stopped deciding after an error in %s (speculation stays "
                "%s): %r",
                self.rank,
                where,
                "on" if running else "off",
                exc,
            )

    def warn_once(self, key: str, message: str, *args: object) -> None:
        if key not in self.warned:
            self.warned.add(key)
            LOGGER.warning(message, *args)

    def attach(self, worker: Any) -> None:
        self.worker = worker
        self.rank = rank_of(worker)
        if installed() is self:  # the process's hook: time the scheduler's garbage collections
            self.costs.start()
        names = self.config.names
        tp_size = getattr(getattr(worker, names.server_args_slot, None), names.tp_size_field, 1)
        replicated = isinstance(tp_size, int) and tp_size > 1  # every rank decides alike
        receiver = sys.modules.get(names.receiver_module)  # patch mode: at attach
        if receiver is not None:
            self.carrier.install(self.patcher.patches, self.config.names, receiver)
        if self.timed and replicated and not self.carrier.is_patched:
            # timings differ between ranks, and so would decisions: the clockless rules instead
            self.timed = False
            self.policy = make_policy(
                dataclasses.replace(self.config.policy, measure=False, kind=PolicyKind.THRESHOLD)
            )
            self.warn_once(
                "measure-tp",
                "sgtrace-hook rank=%d: a policy that reads a clock needs TP size 1 or the "
                "decision carrier (here TP size %d, no carrier: each rank would time its own "
                "steps and decide apart); the load rule and acceptance gate decide",
                self.rank,
                tp_size,
            )
        if not self.patcher.is_started:  # patch mode: SGLang's modules are imported
            plainsites.watch(self)
            self.patcher.start()
        self.plain = plainsites.attach(self, worker, self.config.plain_names)
        if self.plain is not None:  # carry.py: every rank switches at the same step
            self.carrier.engage(replicated)

    def on_decode_result(self, batch: Any, result: Any) -> None:
        if self.worker is None:
            if not getattr(batch, self.config.names.batch_algorithm).is_none():
                self.warn_once(
                    "no-worker",
                    "sgtrace-hook: speculative decode without an EAGLEWorkerV2 in this process "
                    "(non-overlap EAGLEWorker of sglang<=0.5.12?): nothing is decided",
                )
            return
        if not self.carrier.decides:  # carry.py: the source rank's decisions arrive instead
            self.step += 1
            return
        period, interrupted = self._period(batch)
        if self.decides_arrivals:  # what the next arrivals are compared with (_arrive)
            self.running, self.arrived, self.last_batch = unfinished(batch.reqs), 0, len(batch.reqs)
            self.lengths, self.told, self.waved = {}, 0, False
        obs = build(  # unchecked (frozen.py): counters, perf_counter periods, facts.py's lengths
            Observation,
            step=self.step,
            batch_size=len(batch.reqs),
            accept_lengths=accept_lengths(result),
            spec_on=self.spec_on,
            step_period_s=period,
            interrupted_period_s=interrupted,
        )
        cost = self.policy.state.switch_fit  # a switch's cost measured: switchcost.py
        self.decide(obs)
        if self.timed and self.policy.state.switch_fit != cost:
            LOGGER.log(self.measure_level, "sgtrace-hook rank=%d a switch costs %.2f + %.4f n plain steps with n requests running", self.rank, *line_of(self.policy.state.switch_fit))  # fmt: skip
        self.step += 1

    @property
    def decides_arrivals(self) -> bool:
        """Whether the policy is asked on arrivals (:meth:`arrive`)."""
        return bool(getattr(self.policy, "decides_arrivals", False))

    def decide(self, obs: Observation) -> None:
        """Let the policy decide on ``obs`` and post the decision: applied (carry.py) at the
        next receive, or at once."""
        before = getattr(self.policy, "state", None)  # a policy of rules.py's: explain.py
        decision = self.policy.decide(obs)
        self.spec_on = decision.spec_on
        if before is not None and self.timed and LOGGER.isEnabledFor(self.measure_level):
            tail = decision.reason is Reason.TAIL and self.reason is not Reason.TAIL  # its first
            line = decision_line(self.policy.config, before, self.policy.state, obs.step, self.rank, obs.batch_size, decision.changed, tail)  # fmt: skip
            if line is not None:
                LOGGER.log(self.measure_level, "%s", line)
        self.reason = decision.reason
        lengths = obs.accept_lengths
        record = build(  # not DecisionRecord(...): its __init__ costs 2 us (frozen.py)
            DecisionRecord,
            step=obs.step,
            rank=self.rank,
            batch_size=obs.batch_size,
            spec_on=decision.spec_on,
            changed=decision.changed,
            reason=decision.reason.value,
            accept_length=math.fsum(lengths) / len(lengths) if lengths else None,
            step_period_s=obs.step_period_s,
            interrupted_period_s=obs.interrupted_period_s,
            arriving=obs.arriving,
            cohort=obs.cohort,
            cohort_tokens=obs.cohort_tokens,
            wave_lengths=obs.wave_lengths,
        )
        self.carrier.post(record)

    def arrive(self, received: Any) -> None:
        """What the deciding rank received in a loop iteration (carry.py calls it)."""
        self.guarded("arrive", self._arrive, received)

    def _arrive(self, received: Any) -> None:
        """Requests arrived: where they and the running ones make a batch in a larger bucket
        than the latest, or a cohort of them (:mod:`.cohort`) grew into a larger bucket, the
        policy decides on it now (``Observation.arriving``)."""
        if self.worker is None or not self.decides_arrivals:
            return
        new = generate_requests(received)
        if not new:
            return
        self.arrived += new
        size = self.running + self.arrived
        count_lengths(received, self.lengths)
        cohort = largest(self.lengths)
        wave = wave_lengths(self.lengths, size)
        grows = bucket_of(size) > bucket_of(self.last_batch)
        if (
            grows
            or (cohort.size and bucket_of(cohort.size) > self.told)
            or (wave and not self.waved)
        ):
            self.last_batch = max(size, self.last_batch)
            self.told = bucket_of(cohort.size) if cohort.size else 0
            self.waved = bool(wave)
            obs = Observation(self.step, size, None, self.spec_on, arriving=new, cohort=cohort.size, cohort_tokens=cohort.tokens, wave_lengths=wave)  # fmt: skip
            self.decide(obs)

    def apply_decisions(self, records: tuple[DecisionRecord, ...], iteration: int | None) -> None:
        """Record and apply decisions, this rank's or carried (carry.py), also after a fault."""
        try:
            for record in records:
                if iteration is not None:  # where it was applied, and who decided it
                    record = dataclasses.replace(record, rank=self.rank, source_rank=record.rank, iteration=iteration)  # fmt: skip
                self._apply(record)
        except Exception as exc:  # never take the server down; see fail()
            self.fail("apply", exc)

    def _apply(self, record: DecisionRecord) -> None:
        self.spec_on = record.spec_on
        if self.plain is not None:
            self.plain.want_spec_on = record.spec_on
        self.decisions.record(record)
        if record.changed:
            LOGGER.info(
                "sgtrace-hook toggle step=%d rank=%d batch_size=%d spec=%s reason=%s%s",
                record.step,
                self.rank,
                record.batch_size,
                "on" if record.spec_on else "off",
                record.reason,
                "" if self.applies else " applied=no",
            )

    @property
    def applies(self) -> bool:
        """Whether decisions take effect (else the hook only observes)."""
        return self.plain is not None and self.plain.ready

    def _period(self, batch: Any) -> tuple[float | None, float | None]:
        """Seconds since the previous decode result, for a policy that reads a clock: as
        ``(period, None)`` when the two batches were consecutive, ``(None, period)`` when
        other batches (a prefill) ran in between (SGLang numbers every batch it runs,
        ``forward_iter``); ``(None, None)`` for the first result, or not timed."""
        if not self.timed:
            return None, None
        now, it = time.perf_counter(), getattr(batch, "forward_iter", None)
        last, self.last_result = self.last_result, now
        consecutive = it is None or self.last_iter is None or it == self.last_iter + 1
        self.last_iter = it
        if last is None:
            return None, None
        return (now - last, None) if consecutive else (None, now - last)


def _decide_after(self: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    on_decode_result(
        args[0] if args else kwargs.get("batch"), args[1] if args[1:] else kwargs.get("result")
    )


def _attach_after(self: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    attach(self)
