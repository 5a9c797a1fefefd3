"""Where the hook may not switch a speculative worker it only observes, and logs why: upstream's
adaptive controller owns the switch, or DP attention is on (every DP rank schedules its own batch
and SGLang syncs their forward modes each step; ranks deciding on their own batch sizes could
mix speculative and plain forwards). The stand-ins of tests/payload/plain_fakes.py play SGLang.
"""

from __future__ import annotations

import logging
import types

import pytest
from tests.payload.payload_support import hook_config
from tests.payload.plain_fakes import Algorithm, Batch, Req, Scheduler, ServerArgs, Worker

from sgtrace.payload.config import Delivery
from sgtrace.payload.eligibility import worker_refusal
from sgtrace.payload.hook import Hook
from sgtrace.payload.policy import PolicyConfig

CONFIG = hook_config(PolicyConfig(toggle_every_steps=1))
DP_ATTENTION = (
    "DP attention is on: every DP rank schedules its own batch and SGLang syncs their forward "
    "modes each step, so ranks switching at different steps would mix speculative and plain "
    "forwards; the hook only observes"
)
ADAPTIVE = "--speculative-adaptive is on: upstream's controller owns the switch"


@pytest.mark.parametrize(
    ("server_args", "refusal"),
    [
        pytest.param(ServerArgs(enable_dp_attention=True), DP_ATTENTION, id="switch-on"),
        pytest.param(ServerArgs(enable_dp_attention=False), None, id="switch-off"),
        # 0.5.22+: --attn-dp-size N (what --enable-dp-attention is now the deprecated spelling of)
        pytest.param(ServerArgs(attn_dp_size=2), DP_ATTENTION, id="attn-dp-size-2"),
        # TP alone: the decision carrier keeps the ranks alike
        pytest.param(ServerArgs(attn_dp_size=1, tp_size=2), None, id="tp-only"),
        # a release or record without the names: no DP attention, as for the controller
        pytest.param(types.SimpleNamespace(tp_size=2), None, id="names-missing"),
        pytest.param(None, None, id="no-server-args"),
    ],
)
def test_dp_attention_is_refused_and_its_absence_is_not(
    server_args: object, refusal: str | None
) -> None:
    worker = Worker()
    worker.server_args = server_args
    assert worker_refusal(CONFIG, worker) == refusal


def test_a_worker_without_server_args_is_not_refused() -> None:
    worker = Worker()
    del worker.server_args
    assert worker_refusal(CONFIG, worker) is None


def test_the_adaptive_controller_is_named_first_where_both_are_on() -> None:
    worker = Worker(server_args=ServerArgs(enable_dp_attention=True))
    worker.adaptive_controller = object()
    assert worker_refusal(CONFIG, worker) == ADAPTIVE


def test_a_hook_on_a_dp_attention_worker_only_observes_and_says_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Attached as the patched ``__init__`` does: no plain off state, nothing wrapped to
    switch, and a decision it takes is recorded but never applied."""
    hook = Hook(hook_config(PolicyConfig(toggle_every_steps=1), Delivery.PATCH))
    worker = Worker(server_args=ServerArgs(enable_dp_attention=True))
    with caplog.at_level(logging.INFO, logger="sgtrace_hook"):
        hook.attach(worker)
        try:
            scheduler = Scheduler(worker)
            hook.on_decode_result(Batch([Req("a")]), types.SimpleNamespace(accept_lens=[2]))
            assert scheduler.get_new_batch_prefill(Batch([Req("a")])) == "prefill planned"
            assert (hook.plain, hook.spec_on) == (None, False)  # decided off, not applied
            assert (scheduler.spec_algorithm, scheduler.model_worker) == (Algorithm.EAGLE3, worker)
        finally:
            hook.close()
    assert [r.getMessage() for r in caplog.records] == [
        f"sgtrace-hook rank=0: observe only: {DP_ATTENTION}",
        "sgtrace-hook toggle step=0 rank=0 batch_size=1 spec=off reason=forced applied=no",
    ]
