"""The work the tracer benchmark measures: a fake SGLang scheduler and the phases it runs.

Imported as ``tracer_workload`` in each child process of ``tracer_bench.py``. The scheduler
runs a step loop shaped like SGLang's EAGLE v2 decode path: each step makes 8 calls of selected
methods (run_batch, the speculative and target forwards, draft, draft_forward, verify, draft
extend, the decode-result handler) whose ``self``, batch and result carry the attributes the
built-in selection's extractors read (``forward_ct``, ``ps.tp_rank``, ``batch.reqs``,
``seq_lens.shape``, ``spec_info``, ``accept_lens``...), and, per work unit, a few hundred
unselected Python calls over 64 requests (methods, properties, a comprehension, a sort with a
key function, exceptions raised two frames deep and caught), a quarter of them in a second
thread that the step hands its batch to and waits for. :func:`child` runs the phases of a plan
(:func:`make_plan`) and prints their CPU times as JSON.
"""

from __future__ import annotations

import enum
import json
import queue
import threading
import time

REQS = 64  # requests per batch: concurrency 64, as in issue #4
SELECTED_PER_STEP = 8


class ForwardMode(enum.Enum):
    EXTEND = 1
    DECODE = 2


class CpuTensor:
    """Stands in for a CPU tensor: a ``shape``, ``is_cpu`` and ``tolist``."""

    is_cpu = True

    def __init__(self, values):
        self.values, self.shape = values, (len(values),)

    def tolist(self):
        return list(self.values)


class Req:
    def __init__(self, rid):
        self.rid, self.output_ids, self.finished_reason = rid, [], None
        self.sampling = {"max_new_tokens": 1 << 30, "stop": (2,)}

    @property
    def seqlen(self):
        return len(self.output_ids) + 16

    def append_token(self, token):
        self.output_ids.append(token)
        if len(self.output_ids) > 256:
            del self.output_ids[:128]

    def check_finished(self):
        if self.output_ids and self.output_ids[-1] in self.sampling["stop"]:
            self.finished_reason = "stop"
        return self.finished_reason is not None


class SpecInfo:
    def __init__(self):
        self.draft_token_num, self.spec_steps = 4, 3


class Batch:
    def __init__(self, reqs, step):
        self.reqs, self.forward_mode, self.forward_iter = reqs, ForwardMode.DECODE, step
        self.seq_lens = CpuTensor([16] * len(reqs))
        self.spec_info, self.batch_size = SpecInfo(), len(reqs)


class Result:
    def __init__(self, size):
        self.accept_lens = CpuTensor([2] * size)
        self.num_accepted_tokens = size


class Ps:
    tp_rank = 0


def _clamp(value, low, high):
    return low if value < low else high if value > high else value


class Cache:
    """A lookup that raises ``KeyError`` two frames below its caller on a miss."""

    def __init__(self):
        self.table = {key: key * 3 for key in range(0, 64, 2)}

    def _get(self, key):
        return self.table[key]

    def lookup(self, key):
        return self._get(key)


def unselected_work(reqs, cache, units):
    """``units`` passes of the bookkeeping a scheduler does per request; returns a checksum."""
    total = 0
    for _ in range(units):
        for req in reqs:
            total += _clamp(req.seqlen, 0, 1 << 20)
            req.append_token(total & 1023)
            if req.check_finished():
                req.finished_reason = None
        for key in range(8):  # half of them miss: raised in _get, caught here
            try:
                total += cache.lookup(key)
            except KeyError:
                total += 1
        lengths = {req.rid: len(req.output_ids) for req in reqs}
        total += sorted(reqs, key=lambda req: lengths[req.rid])[0].rid
    return total


class Helper(threading.Thread):
    """A second thread (as SGLang's output/stream threads): unselected work per handed batch."""

    def __init__(self, cache):
        super().__init__(daemon=True)
        self.inbox, self.outbox, self.cache = queue.Queue(), queue.Queue(), cache

    def run(self):
        while True:
            reqs, units = self.inbox.get()
            self.outbox.put(unselected_work(reqs, self.cache, units))


def layout(batch):
    """Sizes a forward derives from its batch. Each selected method unpacks them into ten
    locals: SGLang's traced methods have 10 to 25 locals unbound at entry, and reading
    ``frame.f_locals`` there costs per local (3.10 to 3.12)."""
    n = len(batch.reqs)
    return n, n * 4, n * 3, 4, 3, 1, n + 1, n * 2, 0, n - 1


class TargetWorker:
    def forward_batch_generation(self, model_worker_batch, is_verify=False):
        size, tokens, drafts, width, steps, topk, pad, cap, offset, last = layout(
            model_worker_batch
        )
        return Result(size if is_verify else last + 1)


class DraftWorker:
    speculative_num_steps, topk = 3, 1

    def draft(self, batch):
        size, tokens, drafts, width, steps, topk, pad, cap, offset, last = layout(batch)
        return self.draft_forward(batch) + offset

    def draft_forward(self, forward_batch):
        size, tokens, drafts, width, steps, topk, pad, cap, offset, last = layout(forward_batch)
        return forward_batch.batch_size + offset

    def _draft_extend_for_decode(self, batch, result):
        size, tokens, drafts, width, steps, topk, pad, cap, offset, last = layout(batch)
        return result if size else None


class SpecWorker:
    speculative_num_steps, speculative_num_draft_tokens = 3, 4

    def __init__(self):
        self.draft_worker, self.target_worker = DraftWorker(), TargetWorker()

    def forward_batch_generation(self, batch):
        size, tokens, drafts, width, steps, topk, pad, cap, offset, last = layout(batch)
        self.draft_worker.draft(batch)
        result = self.verify(batch)
        return self.draft_worker._draft_extend_for_decode(batch, result)

    def verify(self, batch):
        size, tokens, drafts, width, steps, topk, pad, cap, offset, last = layout(batch)
        return self.target_worker.forward_batch_generation(batch, is_verify=size > 0)


class BatchResultProcessor:
    def __init__(self, cache):
        self.cache = cache

    def process_batch_result_decode(self, batch, result, units):
        size, tokens, drafts, width, steps, topk, pad, cap, offset, last = layout(batch)
        return unselected_work(batch.reqs, self.cache, units) + offset


class Scheduler:
    def __init__(self):
        self.forward_ct, self.ps, self.cache = 0, Ps(), Cache()
        self.reqs = [Req(rid) for rid in range(REQS)]
        self.worker, self.processor = SpecWorker(), BatchResultProcessor(self.cache)
        self.helper = Helper(self.cache)
        self.helper.start()

    def get_next_batch_to_run(self, units):
        unselected_work(self.reqs, self.cache, units)
        return Batch(self.reqs, self.forward_ct + 1)

    def run_batch(self, batch):
        size, tokens, drafts, width, steps, topk, pad, cap, offset, last = layout(batch)
        self.forward_ct += 1
        return self.worker.forward_batch_generation(batch)

    def step(self, units):
        """One decode step: ``units`` of unselected work (a quarter in the helper thread, half
        before run_batch, a quarter in the decode-result handler) around 8 selected calls."""
        self.hand_over(units)
        batch = self.get_next_batch_to_run(units // 2)
        result = self.run_batch(batch)
        self.processor.process_batch_result_decode(batch, result, units // 4)

    def hand_over(self, units):
        """The helper thread's share, waited for: the threads never compete for the GIL,
        whose 5 ms switch interval would otherwise make the timings depend on luck."""
        if units:
            self.helper.inbox.put((self.reqs, units - units // 2 - units // 4))
            self.helper.outbox.get()

    def raises(self, count):
        """``count`` exceptions raised two frames down and caught, nothing else."""
        for _ in range(count):
            try:
                self.cache.lookup(1)
            except KeyError:
                pass

    def unselected(self, units):
        """The same unselected work as :meth:`step`, without the selected calls."""
        self.hand_over(units)
        unselected_work(self.reqs, self.cache, units // 2)
        unselected_work(self.reqs, self.cache, units // 4)


def child(plan):
    """Run the phases of ``plan`` (``[[name, kind, units, steps], ...]``), print their times."""
    scheduler, rounds, out = Scheduler(), plan["rounds"], {}
    for name, kind, units, steps in plan["phases"]:
        run = getattr(scheduler, kind)
        for _ in range(max(1, steps // 10)):  # warm-up
            run(units)
        best = float("inf")
        for _ in range(rounds):
            start = time.process_time()  # CPU time of both threads: other load shows less
            for _ in range(steps):
                run(units)
            best = min(best, (time.process_time() - start) / steps)
        out[name] = best
    print(json.dumps(out))


UNITS = (20, 100, 400)  # units of unselected work per step of the steps@Nu phases
RAISES = 1000  # exceptions per round of the raises phase


def make_plan():
    """The same work on every machine and run, so that runs compare: the step rates it
    gives are measured (in brackets in the table)."""
    phases = [
        ["selected", "step", 0, 2000],
        ["unselected", "unselected", UNITS[1], 20],
        ["raises", "raises", RAISES, 50],
    ]
    phases += [[f"steps@{units}u", "step", units, 2000 // units] for units in UNITS]
    return {"rounds": 7, "phases": phases}
