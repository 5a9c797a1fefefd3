"""The hook never takes a server down nor flips it: injected faults, each kept to one log line.

In-process, with the stand-ins of tests/payload/plain_fakes.py (a worker as the hook sees
``EAGLEWorkerV2``, the scheduler, batches and results); the missing and damaged config run the
toy server patched with ``--mode patch``.
"""

from __future__ import annotations

import json
import logging
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.hooks.hook_support import BATCH_SIZE_POLICY, run_fake_server, toy_spec, toy_tree
from tests.payload import plain_fakes
from tests.payload.payload_support import hook_config
from tests.payload.plain_fakes import Algorithm, Batch, Req, Scheduler, Worker

from sgtrace.hooks.apply import patch_source
from sgtrace.payload import hook as payload_hook
from sgtrace.payload import registry
from sgtrace.payload.policy import PolicyConfig, PolicyKind

POLICY = PolicyConfig(
    preset="batch-size", kind=PolicyKind.THRESHOLD, acceptance_gate=False, min_dwell_steps=0
)


class Server:
    """Drives one hooked scheduler (the stand-ins of plain_fakes.py) as SGLang's loop does:
    prefill scheduling (where the hook switches), a decode step, its result (the hook decides),
    the result processing (where it re-admits retracted requests)."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        payload_hook.attach(worker)  # what the patched __init__ calls: wraps the scheduler
        self.scheduler = Scheduler(worker)  # built after: its future map's arguments recorded

    def step(self, batch_size: int) -> bool:
        """One iteration at ``batch_size``: whether it ran speculating. Where the hook switched,
        the running requests were retracted and no decode step runs in this iteration."""
        running = Batch([Req(f"r{i}") for i in range(batch_size)])
        self.scheduler.get_new_batch_prefill(running)
        on = self.scheduler.model_worker is self.worker
        batch = Batch(running.reqs, Algorithm.EAGLE3 if on else Algorithm.NONE)
        result = types.SimpleNamespace(
            speculative_num_draft_tokens=4 if on else None,
            accept_lens=[3] * batch_size if on else None,
        )
        if batch.reqs:
            payload_hook.on_decode_result(batch, result)  # what the patched decide site calls
        self.scheduler.process_batch_result(batch, result)
        return on


@pytest.fixture
def hooked() -> Iterator[payload_hook.Hook]:
    """An installed hook, delivered by a patch (it wraps the stand-ins at attach)."""
    hook = payload_hook.Hook(hook_config(POLICY))
    registry.register(registry.PluginKind.HOOK, hook)
    plain_fakes.reset()
    yield hook
    payload_hook.uninstall()


def errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_failing_switch_keeps_the_server_running_as_it_is(
    hooked: payload_hook.Hook, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(req: Any, tree: Any, is_insert: bool) -> None:
        raise RuntimeError("KV pool out of sync")

    server = Server(Worker())
    assert hooked.plain is not None
    monkeypatch.setattr(hooked.plain, "release_kv", broken)
    assert [server.step(size) for size in (1, 64, 64, 1, 64)] == [True] * 5
    assert errors(caplog) == [
        "sgtrace-hook rank=0 stopped deciding after an error in switch (speculation stays on): "
        "RuntimeError('KV pool out of sync')"
    ]
    assert hooked.failed and hooked.plain.want_spec_on and hooked.plain.switches == 0
    assert len(hooked.decisions.entries) == 2  # none after the fault
    assert server.scheduler.spec_algorithm is Algorithm.EAGLE3  # nothing half switched


def test_a_failing_capture_keeps_speculation_on(
    hooked: payload_hook.Hook, caplog: pytest.LogCaptureFixture
) -> None:
    """The plain state cannot be built (here: a future map built before the hook could record
    how): the fault is logged once, the server speculates as launched."""
    server = Server(Worker())
    server.scheduler.future_map = object.__new__(plain_fakes.FutureMap)  # never recorded
    assert [server.step(size) for size in (64, 64, 64)] == [True] * 3
    assert [message.split(":")[0] for message in errors(caplog)] == [
        "sgtrace-hook rank=0 stopped deciding after an error in switch (speculation stays on)"
    ]
    assert hooked.plain is not None and not hooked.plain.ready
    assert hooked.decisions.entries == ()  # it failed before the first result


def test_a_policy_fault_while_off_keeps_speculation_off(
    hooked: payload_hook.Hook, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = Server(Worker())
    assert [server.step(size) for size in (1, 64, 64)] == [True, True, False]

    def broken(obs: object) -> object:
        raise ZeroDivisionError("a policy bug")

    monkeypatch.setattr(hooked.policy, "decide", broken)
    assert [server.step(size) for size in (1, 1, 64, 1)] == [False] * 4
    assert hooked.plain is not None and hooked.plain.switches == 1
    assert errors(caplog) == [
        "sgtrace-hook rank=0 stopped deciding after an error in on_decode_result "
        "(speculation stays off): ZeroDivisionError('a policy bug')"
    ]


def test_a_policy_fault_while_on_keeps_speculation_on(
    hooked: payload_hook.Hook, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = Server(Worker())
    monkeypatch.setattr(hooked.policy, "decide", lambda obs: 1 / 0)
    assert [server.step(size) for size in (64, 64, 1)] == [True] * 3
    assert hooked.plain is not None and hooked.plain.switches == 0
    assert len(errors(caplog)) == 1


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (None, "cannot read {config}: [Errno 2] No such file or directory: '{config}'"),
        ('{"policy": ', "cannot read {config}: Expecting value: line 1 column 12 (char 11)"),
        ("[1, 2]", "{config} holds no JSON object"),
        ('{"policy": {}}', "{config}: not a config of this sgtrace hook (KeyError('source'))"),
        (  # a config of an sgtrace before the payload was given SGLang's names
            "-sglang_names",
            "{config}: it has no 'sglang_names' (the SGLang names the hook looks up): written by "
            "an older sgtrace; regenerate the hook directory (sgtrace inject-hook)",
        ),
        (  # a config of an sgtrace before the plain off state
            "-plain_off_names",
            "{config}: it has no 'plain_off_names' (the SGLang names of the plain off state): "
            "written by an older sgtrace; regenerate the hook directory (sgtrace inject-hook)",
        ),
        (  # a config written before a map name was added (the DP attention refusal's)
            "-sglang_names/server_args_slot",
            "{config}: it lacks the SGLang names server_args_slot: written by an older sgtrace; "
            "regenerate the hook directory (sgtrace inject-hook)",
        ),
        (  # a config whose off state was upstream's zero-step state (gone from the hook)
            '+{"options": {"log_measurements": false, "off_kernel": "decode", "off_step": '
            '"lean", "off_state": "zero-step"}}',
            "{config}: its off state is 'zero-step', which this hook no longer has (off is "
            "SGLang's plain decode path): written by an older sgtrace; regenerate the hook "
            "directory (sgtrace inject-hook)",
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
        *outer, key = damage[1:].split("/")
        owner = data
        for part in outer:
            owner = owner[part]
        del owner[key]
        config.write_text(json.dumps(data))
    elif damage.startswith("+"):  # the generated config with keys of an older one
        config.write_text(json.dumps({**json.loads(config.read_text()), **json.loads(damage[1:])}))
    else:
        config.write_text(damage)
    run = run_fake_server(
        [tree.root], "--phases", "1x10,64x10", "--payload", "sglang.sgtrace_payload"
    )
    assert run.report["launched_steps"] == [3] * 20
    assert run.report["outputs_ok"] is True and run.report["decisions"] == []
    message = why.format(config=config)
    assert run.hook_lines == [f"sgtrace-hook: disabled, speculation runs as launched: {message}"]
