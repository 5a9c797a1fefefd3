"""Off as a plain decode: the speculative server runs its decode steps as a server without
speculation does, and switches by re-admitting its running requests.

A switch happens on every TP rank in the same scheduler iteration, at the start of the
scheduler's prefill scheduling (``get_new_batch_prefill``, by then the last prefill batch has
been merged into the running batch). It does, with SGLang's own functions only:

1. **Retract with caching.** Each unfinished request of the running batch gives its KV back
   as a finished request does (``release_kv_cache(req, tree_cache, is_insert=True)``): the
   committed KV goes into the radix cache, the slots the speculative step allocated ahead and
   the request's row are freed. ``reset_for_retract`` readies it for a new prefill, exactly as
   SGLang's own retraction under memory pressure, and the running batch is emptied. The batch
   in flight finishes; its results for these requests are dropped as for any retracted request
   and computed again.
2. **Flip the mode.** The scheduler's ``spec_algorithm`` (what new batches are), the worker
   its ``run_batch`` calls (``model_worker``: the target worker while off), its future map (the
   overlap scheduler's relay between iterations: while off, one built as a plain server builds
   it), and the target model runner's algorithm, attention backend and decode CUDA graph
   runner: while off, the plain DECODE graphs captured once (:meth:`capture`) on a backend of
   their own, so that the verify graphs' buffers are left alone.
3. **Re-admit after the batch in flight.** The requests go back to the waiting queue once the
   batch that was in flight at the switch had its results processed (and dropped for them, as
   they were retracted; a prefill scheduled before would have cleared that mark too early, and
   SGLang's own retraction re-admits no sooner): right after the scheduler's next
   ``process_batch_result``, or at the next prefill scheduling where none ran. They are prefilled in
   the new mode: the radix cache holds all their tokens but the last, so the prefill is one
   token per request. Switching on, that prefill runs the draft too and gives every request its draft
   input; the draft KV of tokens decoded while off was never written (a cold start for those
   positions, as upstream's ``SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND``). With the option
   ``catch_up`` a switch on releases the requests' KV without caching it: what their last
   prefill matched stays cached (the prefix they had when they went off, or their prompt's
   cached part), the rest, the tokens decoded while off, is prefilled again in the speculative
   mode, and the draft extend of that prefill writes their draft KV.

An abort that arrives while requests are held (between a switch and their re-admission: in
neither the waiting queue nor the running batch) is shown them: the scheduler's abort handler
runs with the held requests at the end of its waiting queue, and those it leaves there are
taken back (:meth:`PlainOffSwitch.show_held`, :meth:`PlainOffSwitch.hide_held`). A held request
is a retracted one, so SGLang aborts it exactly as its own retracted requests in the queue.

Every SGLang name comes from the config (:class:`~.config.PlainOffNames`). Requests arriving,
finishing, aborting or retracted under memory pressure while off follow SGLang's plain paths.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

from .config import PlainOffNames

BUILT_WITH = "_sgtrace_built_with"  # a future map's constructor arguments (plainsites.py)


class PlainOffSwitch:
    """Switches one scheduler process between speculative and plain decoding."""

    def __init__(
        self, worker: Any, names: PlainOffNames, logger: logging.Logger, catch_up: bool = False
    ) -> None:
        self.worker = worker
        self.names = names
        self.log = logger
        self.catch_up = catch_up  # switching on, prefill the tokens decoded while off again
        self.spec_on = True  # the mode the scheduler runs
        self.want_spec_on = True  # the mode the last decision asked for
        self.switches = 0
        module = importlib.import_module(names.release_module)
        self.release_kv: Any = getattr(module, names.release_kv)
        self.plain_state: dict[str, Any] | None = None  # the target runner's plain DECODE state
        self.spec_state: dict[str, Any] | None = None  # the same attributes as launched
        self.launched_algorithm: Any = None
        self.none_algorithm: Any = None
        self.future_maps: dict[bool, Any] = {}  # spec_on -> the scheduler's future map for it
        self.held: list[Any] = []  # retracted at the last switch, re-admitted at the next call

    @property
    def ready(self) -> bool:
        """The plain DECODE graphs exist: the switch can run."""
        return self.plain_state is not None

    def target_of(self, scheduler: Any) -> tuple[Any, Any]:
        """The scheduler's target worker (the speculative worker's target: the plain decode
        path's ``model_worker``) and its model runner."""
        target = getattr(scheduler, self.names.target_slot)
        return target, getattr(target, self.names.runner_slot)

    def capture(self, scheduler: Any) -> None:
        """Build the plain decode path's state, once, at the scheduler's first prefill
        scheduling (no batch ran yet; every rank is there in the same iteration, as the
        capture's collectives need): the plain future map and the target's DECODE CUDA graphs,
        captured on a backend of their own.

        The plain state is every attribute of the target's model runner that the capture set
        (the algorithm, the backend, the graph runner, whatever else the release records), so
        that no release's attribute names need to be known beyond the three set before it."""
        n = self.names
        _, runner = self.target_of(scheduler)
        launched = dict(vars(runner))
        self.launched_algorithm = launched[n.runner_algorithm]
        self.none_algorithm = getattr(type(self.launched_algorithm), n.none_member)
        launched_map = getattr(scheduler, n.future_map_slot, None)
        if launched_map is not None:
            self.future_maps = {True: launched_map, False: self.plain_future_map(launched_map)}
        changed: list[str] = []
        try:
            setattr(runner, n.runner_algorithm, self.none_algorithm)
            setattr(runner, n.backend_slot, getattr(runner, n.new_attn_backend)())
            getattr(runner, n.capture_decode)()
            now = vars(runner)
            changed = sorted(k for k in now if k not in launched or now[k] is not launched[k])
            plain = {key: now[key] for key in changed}
        finally:
            for key in changed:
                if key in launched:
                    setattr(runner, key, launched[key])
        self.plain_state = plain
        self.spec_state = {key: launched[key] for key in changed if key in launched}
        self.log.info(
            "sgtrace-hook plain off state ready: the target's DECODE graphs captured; off swaps "
            "the model runner's %s%s",
            ", ".join(changed),
            " and the scheduler's future map" if self.future_maps else "",
        )

    def plain_future_map(self, launched: Any) -> Any:
        """The future map a plain server builds: the launched one's class, called again with
        the arguments SGLang built it with (recorded by the hook), the algorithm NONE."""
        built = getattr(launched, BUILT_WITH, None)
        if built is None:
            raise RuntimeError(
                f"{type(launched).__name__} was built before the hook could record how; the "
                "plain off state needs the hook installed at interpreter start (runtime mode)"
            )
        args, kwargs = built
        kind = type(self.launched_algorithm)
        if not any(isinstance(value, kind) for value in (*args, *kwargs.values())):
            raise RuntimeError(f"{type(launched).__name__} was built without an algorithm")

        def plain(value: Any) -> Any:
            return self.none_algorithm if isinstance(value, kind) else value

        return type(launched)(*map(plain, args), **{k: plain(v) for k, v in kwargs.items()})

    def before_prefill(self, scheduler: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Site ``switch``: the scheduler is about to schedule prefills; capture the plain
        state the first time, then switch if asked (and the last switch's requests are back in
        the queue: the hook re-admits them first)."""
        n = self.names
        if not self.ready:
            self.capture(scheduler)
            return
        if self.want_spec_on == self.spec_on or self.held:
            return
        running = args[0] if args else kwargs.get(n.running_batch_name)
        if running is None:
            running = getattr(scheduler, n.running_batch_name)
        self.switch(scheduler, running, self.want_spec_on)

    def readmit(self, scheduler: Any) -> None:
        """Site ``result`` (after the scheduler processed a batch's results), and before prefill
        scheduling: the requests retracted at the last switch go back to the waiting queue."""
        if self.held:
            held, self.held = self.held, []
            add = getattr(scheduler, self.names.add_to_queue)
            for req in held:
                add(req, **{self.names.retracted_kw: True})

    def show_held(self, scheduler: Any) -> list[Any]:
        """Site ``abort`` (before the scheduler's abort handler): the held requests go to the
        end of the waiting queue, where the handler looks for queued requests; they are what
        SGLang's own retraction leaves there. The requests shown, for :meth:`hide_held`."""
        shown = list(self.held)
        getattr(scheduler, self.names.waiting_queue_name).extend(shown)
        return shown

    def hide_held(self, scheduler: Any, shown: list[Any]) -> None:
        """Site ``abort`` (after the handler): the shown requests still in the waiting queue
        (by identity) leave it and stay held; those the handler popped were aborted by SGLang
        (it answered the tokenizer as for any queued request) and are held no more."""
        queue = getattr(scheduler, self.names.waiting_queue_name)
        ids = {id(req) for req in shown}
        left = {id(req) for req in queue if id(req) in ids}
        for index in range(len(queue) - 1, -1, -1):  # in place, as SGLang pops
            if id(queue[index]) in ids:
                del queue[index]
        aborted = len(shown) - len(left)
        self.held = [req for req in self.held if id(req) not in ids or id(req) in left]
        if aborted:
            self.log.info("sgtrace-hook aborted %d held requests (retracted at a switch)", aborted)

    def switch(self, scheduler: Any, running: Any, spec_on: bool) -> None:
        """Retract every running request into the radix cache and flip the mode; the requests
        are held until :meth:`readmit` (after the batch in flight had its results processed)."""
        n = self.names
        tree = getattr(scheduler, n.tree_cache_attr)
        future_map = self.future_maps.get(spec_on)
        target, runner = self.target_of(scheduler)
        state = self.spec_state if spec_on else self.plain_state
        assert state is not None
        algorithm = self.launched_algorithm if spec_on else self.none_algorithm
        worker = self.worker if spec_on else target
        moved = [
            req
            for req in running.reqs
            if not req.finished() and not getattr(req, n.retracted_flag, False)
        ]
        insert = not (spec_on and self.catch_up)  # catching up: what went uncached is prefilled
        for req in moved:
            self.release_kv(req, tree, **{n.release_insert_kw: insert})
            getattr(req, n.reset_retract)()
        getattr(running, n.filter_method)(keep_indices=[])
        setattr(running, n.batch_full_flag, False)  # else no prefill is scheduled: it has room
        setattr(scheduler, n.scheduler_algorithm, algorithm)
        setattr(scheduler, n.worker_slot, worker)
        if future_map is not None:
            setattr(scheduler, n.future_map_slot, future_map)
        for attr, value in state.items():
            setattr(runner, attr, value)
        self.held = moved
        self.spec_on = spec_on
        self.switches += 1
        self.log.info(
            "sgtrace-hook switched spec=%s (plain off state): %d running requests retracted",
            "on" if spec_on else "off",
            len(moved),
        )
