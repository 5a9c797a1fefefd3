"""The hook never takes a server down nor flips it: injected faults, each kept to one log line.

In-process, with fakes passed in (a worker as the hook sees ``EAGLEWorkerV2``, batches and
results); the missing and damaged config run the toy server patched with ``--mode patch``.
"""

from __future__ import annotations

import json
import logging
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.hooks.hook_support import BATCH_SIZE_POLICY, run_fake_server, toy_spec, toy_tree
from tests.payload.payload_support import switching_config

from sgtrace.hooks.apply import patch_source
from sgtrace.payload import hook as payload_hook
from sgtrace.payload import registry
from sgtrace.payload.policy import PolicyConfig, PolicyKind

POLICY = PolicyConfig(
    preset="batch-size", kind=PolicyKind.THRESHOLD, acceptance_gate=False, min_dwell_steps=0
)


class Worker:
    """``EAGLEWorkerV2`` as the hook sees it; ``apply_runtime_state`` fails when told to."""

    def __init__(self, *, fail_to_apply: bool = False) -> None:
        self.speculative_num_steps = 3
        self.speculative_num_draft_tokens = 4
        self.topk = 1
        self.tp_rank = 0
        self.server_args = types.SimpleNamespace(tp_size=1)
        self.adaptive_controller: object = None
        self.fail_to_apply = fail_to_apply
        self.applied: list[int] = []

    def build_adaptive_runtime_state(self, **kwargs: object) -> types.SimpleNamespace:
        return types.SimpleNamespace(speculative_num_steps=kwargs["speculative_num_steps"])

    def apply_runtime_state(self, state: types.SimpleNamespace) -> None:
        if self.fail_to_apply:
            raise RuntimeError("CUDA graph runner missing")
        self.applied.append(state.speculative_num_steps)
        self.speculative_num_steps = state.speculative_num_steps


class Server:
    """Drives one hooked worker: a decode result, then the next launch (as upstream does)."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        payload_hook.attach(worker)
        controller = worker.adaptive_controller
        controller.register(types.SimpleNamespace(speculative_num_steps=3))  # type: ignore[attr-defined]
        controller.init_states(cuda_graph_bs=[1, 64])  # type: ignore[attr-defined]

    def step(self, batch_size: int) -> int:
        """One decode step at ``batch_size``; the draft steps of the next launch."""
        on = self.worker.speculative_num_steps > 0
        batch = types.SimpleNamespace(
            reqs=[object()] * batch_size,
            spec_algorithm=types.SimpleNamespace(is_none=lambda: False),
        )
        result = types.SimpleNamespace(
            speculative_num_draft_tokens=4 if on else 1, accept_lens=[3] * batch_size
        )
        payload_hook.on_decode_result(batch, result)
        self.worker.adaptive_controller.activate_step_by_batch(batch_size)  # type: ignore[attr-defined]
        return self.worker.speculative_num_steps


@pytest.fixture
def hooked(monkeypatch: pytest.MonkeyPatch) -> Iterator[payload_hook.Hook]:
    """An installed hook (patch delivery: nothing imported) whose release can switch."""
    hook = payload_hook.Hook(switching_config(monkeypatch, POLICY))
    registry.register(registry.PluginKind.HOOK, hook)
    yield hook
    payload_hook.uninstall()


def errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_failing_switch_keeps_the_server_running_as_it_is(
    hooked: payload_hook.Hook, caplog: pytest.LogCaptureFixture
) -> None:
    worker = Worker(fail_to_apply=True)
    server = Server(worker)
    assert [server.step(size) for size in (1, 64, 64, 1, 64)] == [3, 3, 3, 3, 3]
    assert errors(caplog) == [
        "sgtrace-hook rank=0 stopped deciding after an error in apply_runtime_state "
        "(speculation stays on): RuntimeError('CUDA graph runner missing')"
    ]
    assert hooked.failed and worker.adaptive_controller.target_steps == 3  # type: ignore[attr-defined]
    assert len(hooked.decisions.entries) == 2  # none after the fault


def test_a_policy_fault_while_off_keeps_speculation_off(
    hooked: payload_hook.Hook, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = Worker()
    server = Server(worker)
    assert [server.step(size) for size in (1, 64)] == [3, 0]

    def broken(obs: object) -> object:
        raise ZeroDivisionError("a policy bug")

    monkeypatch.setattr(hooked.policy, "decide", broken)
    assert [server.step(size) for size in (1, 1, 64, 1)] == [0, 0, 0, 0]
    assert worker.applied == [0]
    assert errors(caplog) == [
        "sgtrace-hook rank=0 stopped deciding after an error in on_decode_result "
        "(speculation stays off): ZeroDivisionError('a policy bug')"
    ]


def test_a_policy_fault_while_on_keeps_speculation_on(
    hooked: payload_hook.Hook, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = Worker()
    server = Server(worker)
    monkeypatch.setattr(hooked.policy, "decide", lambda obs: 1 / 0)
    assert [server.step(size) for size in (64, 64, 1)] == [3, 3, 3]
    assert (worker.applied, len(errors(caplog))) == ([], 1)


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (None, "cannot read {config}: [Errno 2] No such file or directory: '{config}'"),
        ('{"policy": ', "cannot read {config}: Expecting value: line 1 column 12 (char 11)"),
        ("[1, 2]", "{config} holds no JSON object"),
        (
            '{"policy": {}}',
            "{config}: not a config of this sgtrace hook (KeyError('unsupported_reason'))",
        ),
        (  # a config of an sgtrace before the payload was given SGLang's names
            "-sglang_names",
            "{config}: it has no 'sglang_names' (the SGLang names the hook looks up): written by "
            "an older sgtrace; regenerate the hook directory (sgtrace inject-hook)",
        ),
    ],
)
def test_patch_mode_without_a_usable_config_runs_as_launched(
    tmp_path: Path, damage: str | None, why: str
) -> None:
    tree = toy_tree("zero_step_states", tmp_path / "patched")
    patch_source(tree, BATCH_SIZE_POLICY, write=True, spec=toy_spec(tree))
    config = tree.root / "sglang" / "sgtrace_hook.json"
    if damage is None:
        config.unlink()
    elif damage.startswith("-"):  # the generated config without one key
        data = json.loads(config.read_text())
        del data[damage[1:]]
        config.write_text(json.dumps(data))
    else:
        config.write_text(damage)
    run = run_fake_server(
        [tree.root], "--phases", "1x10,64x10", "--payload", "sglang.sgtrace_payload"
    )
    assert run.report["launched_steps"] == [3] * 20
    assert run.report["outputs_ok"] is True and run.report["decisions"] == []
    message = why.format(config=config)
    assert run.hook_lines == [f"sgtrace-hook: disabled, speculation runs as launched: {message}"]
