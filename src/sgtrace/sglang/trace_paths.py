"""Where the tracer reads its facts in SGLang's objects: argument names and attribute paths.

The tracer (:mod:`sgtrace.tracer.selection`) says which fact each recorded function yields and
how it is turned into JSON; the SGLang spellings it reads them from are here, with the rest of
the map. A path is a tuple of attribute names (indexes written as digits); an argument that is
spelled differently across releases lists every spelling (``batch`` in 0.5.16,
``model_worker_batch`` in 0.5.9), the first that yields a value winning.

>>> TRACE_PATHS.rank_paths
(('tp_rank',), ('ps', 'tp_rank'))
>>> TRACE_PATHS.batch_arguments
('batch', 'model_worker_batch')
"""

from __future__ import annotations

from dataclasses import dataclass

Path = tuple[str, ...]


@dataclass(frozen=True)
class TracePaths:
    """The argument names and attribute paths of SGLang the tracer reads its facts from.

    Objects: a batch (``ScheduleBatch``, ``ModelWorkerBatch``), the decode result, the EAGLE
    worker (``self`` of the speculative parts), a ``ForwardBatch``, and the scheduler (``self``
    of the step, whose ``forward_ct`` numbers the steps and whose ``tp_rank`` gives the rank:
    ``Scheduler.tp_rank`` in 0.5.9, ``Scheduler.ps.tp_rank`` in 0.5.16).
    """

    batch_arguments: tuple[str, ...]  # a batch, as the worker's functions name it
    schedule_batch_argument: str  # the batch of the scheduler's step and decode result
    result_argument: str  # the decode result of the decode-result handler
    forward_batch_argument: str  # a ForwardBatch
    is_verify_argument: str  # the target forward's flag: a verify
    batch_size: Path  # of a worker's batch: the first dimension of its lengths
    requests: Path  # of the scheduler's batch: its requests
    forward_mode: Path
    forward_iter: Path
    accept_lengths: Path  # of a decode result
    accepted_drafts: tuple[Path, ...]  # of a decode result, by release
    num_steps: Path  # of the EAGLE worker
    draft_width: Path  # of the EAGLE worker
    topk: Path  # of the draft worker
    forward_batch_size: Path  # of a ForwardBatch
    verify_draft_width: Path  # of a batch being verified
    verify_num_steps: Path  # of a batch being verified
    step_paths: tuple[Path, ...]  # of the scheduler: the step counter
    rank_paths: tuple[Path, ...]  # of the scheduler: the TP rank, by release


TRACE_PATHS = TracePaths(
    batch_arguments=("batch", "model_worker_batch"),
    schedule_batch_argument="batch",
    result_argument="result",
    forward_batch_argument="forward_batch",
    is_verify_argument="is_verify",
    batch_size=("seq_lens", "shape", "0"),
    requests=("reqs",),
    forward_mode=("forward_mode",),
    forward_iter=("forward_iter",),
    accept_lengths=("accept_lens",),
    accepted_drafts=(("num_correct_drafts",), ("num_accepted_tokens",)),
    num_steps=("speculative_num_steps",),
    draft_width=("speculative_num_draft_tokens",),
    topk=("topk",),
    forward_batch_size=("batch_size",),
    verify_draft_width=("spec_info", "draft_token_num"),
    verify_num_steps=("spec_info", "spec_steps"),
    step_paths=(("forward_ct",),),
    rank_paths=(("tp_rank",), ("ps", "tp_rank")),
)
