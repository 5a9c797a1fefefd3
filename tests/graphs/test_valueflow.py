"""Values that flow through calls, stated edge by edge: parameters typed by their callers,
callables stored on ``self``, the async protocol, external nodes' modules and dispatchers
narrowed by the argument's type (issue #22). Each rule has a golden case and a negative twin.
"""

from __future__ import annotations

import pytest

from tests.graphs.golden import CASES_DIR, Case
from tests.graphs.helpers import Expect, assert_edges, assert_unresolved, expect

W = "app.work"
O = "app.owner"  # noqa: E741
S = "app.stream"
G = "app.gpu"
D = "app.dispatch"

FLOW_EXPECTED: dict[str, Expect] = {
    "param_typed_by_callers": expect(
        {
            (f"{W}:helper", f"{W}:Worker.run", "argument"),
            (f"{W}:Runner.start", f"{W}:Worker.run", "argument"),
            (f"{W}:Runner.start", f"{W}:Batch.run", "argument"),
            (f"{W}:pump", f"{W}:Fast.go", "argument"),
            (f"{W}:pump", f"{W}:Slow.go", "argument"),
        },
        {(f"{W}:helper", f"{W}:Fast.go"), (f"{W}:pump", f"{W}:Worker.run")},
    ),
    "param_typed_by_callers_not_other_function": expect(
        {
            (f"{W}:helper", f"{W}:Worker.run", "argument"),
            (f"{W}:Tool.helper", f"{W}:Plain.run", "argument"),
        },
        {
            (f"{W}:helper", f"{W}:Plain.run"),
            (f"{W}:Tool.helper", f"{W}:Worker.run"),
            (f"{W}:never_called", f"{W}:Worker.run"),
            (f"{W}:never_called", f"{W}:Plain.run"),
            (f"{W}:Tool.unbound", f"{W}:Worker.run"),
            (f"{W}:Tool.unbound", f"{W}:Plain.run"),
            (f"{W}:from_outside", f"{W}:Worker.run"),
        },
    ),
    "callable_stored_on_self": expect(
        {
            (f"{O}:Owner.fire", f"{O}:Service.finish", "argument"),
            (f"{O}:Owner.fire", f"{O}:log_done", "argument"),
            (f"{O}:Owner.fire", f"{O}:Timer.tick", "argument"),
        }
    ),
    "callable_stored_on_self_not_crossed": expect(
        {
            (f"{O}:Owner.fire", f"{O}:alpha", "argument"),
            (f"{O}:Other.fire", f"{O}:beta", "argument"),
            (f"{O}:main", f"{O}:gamma", "local"),
        },
        {
            (f"{O}:Owner.fire", f"{O}:beta"),
            (f"{O}:Other.fire", f"{O}:alpha"),
            (f"{O}:Owner.close", f"{O}:alpha"),
            (f"{O}:Owner.fire", f"{O}:gamma"),
            (f"{O}:Other.fire", f"{O}:gamma"),
        },
    ),
    "async_protocol_methods": expect(
        {
            (f"{S}:serve", f"{S}:Session.__aenter__", "protocol"),
            (f"{S}:serve", f"{S}:Session.__aexit__", "protocol"),
            (f"{S}:serve", f"{S}:Session.send", "mro"),
            (f"{S}:serve", f"{S}:Feed.__aiter__", "protocol"),
            (f"{S}:serve", f"{S}:Feed.__anext__", "protocol"),
            (f"{S}:serve", f"{S}:Token.decode", "element"),
            (f"{S}:serve", f"{S}:Chunk.size", "element"),
        }
    ),
    "async_protocol_not_sync_methods": expect(
        set(),
        {
            (f"{S}:serve", f"{S}:SyncOnly.__enter__"),
            (f"{S}:serve", f"{S}:SyncOnly.__exit__"),
            (f"{S}:serve", f"{S}:SyncOnly.__iter__"),
            (f"{S}:serve", f"{S}:SyncOnly.__next__"),
            (f"{S}:serve", f"{S}:AsyncOnly.__aenter__"),
            (f"{S}:serve", f"{S}:AsyncOnly.__aexit__"),
        },
    ),
    "external_module_from_import": expect(
        {
            (f"{G}:step", "torch.cuda:Stream.synchronize", "external"),
            (f"{G}:step", "torch.cuda:synchronize", "external"),
            (f"{G}:step", "torch:Tensor.add", "external"),
            (f"{G}:step", "torch.nn:Linear", "external"),
            (f"{G}:step", "torch.cuda:Stream.wait_stream", "external"),
            (f"{G}:step", "numpy.random:default_rng", "external"),
        },
        {
            (f"{G}:step", "torch.cuda.Stream:synchronize"),
            (f"{G}:step", "torch.Tensor:add"),
            (f"{G}:step", "torch.cuda.Stream:wait_stream"),
            (f"{G}:step", "np.random:default_rng"),
        },
    ),
    "external_module_not_split_inside_name": expect(
        {
            (f"{G}:step", "torch.distributed:barrier", "external"),
            (f"{G}:step", "collections:OrderedDict.fromkeys", "external"),
            (f"{G}:step", "concurrent.futures:ThreadPoolExecutor.submit", "external"),
        },
        {
            (f"{G}:step", "collections.OrderedDict:fromkeys"),
            (f"{G}:step", "concurrent.futures.ThreadPoolExecutor:submit"),
            (f"{G}:step", "torch:distributed.barrier"),
        },
    ),
    "dispatcher_by_argument_type": expect(
        {
            (f"{D}:Scheduler.generate", f"{D}:Scheduler.handle_generate", "dispatch"),
            (f"{D}:Scheduler.stream", f"{D}:Scheduler.handle_generate", "dispatch"),
            (f"{D}:Scheduler.abort", f"{D}:Scheduler.handle_abort", "dispatch"),
            (f"{D}:Scheduler.any_request", f"{D}:Scheduler.handle_generate", "dispatch"),
            (f"{D}:Scheduler.any_request", f"{D}:Scheduler.handle_abort", "dispatch"),
        },
        {
            (f"{D}:Scheduler.generate", f"{D}:Scheduler.handle_abort"),
            (f"{D}:Scheduler.stream", f"{D}:Scheduler.handle_abort"),
            (f"{D}:Scheduler.abort", f"{D}:Scheduler.handle_generate"),
        },
    ),
    "dispatcher_unknown_argument_keeps_all": expect(
        {
            (f"{D}:Scheduler.incoming", f"{D}:Scheduler.handle_generate", "dispatch"),
            (f"{D}:Scheduler.incoming", f"{D}:Scheduler.handle_abort", "dispatch"),
            (f"{D}:Scheduler.mistyped", f"{D}:Scheduler.handle_generate", "dispatch"),
            (f"{D}:Scheduler.mistyped", f"{D}:Scheduler.handle_abort", "dispatch"),
        },
        {
            (f"{D}:Scheduler.incoming", f"{D}:Scheduler.not_this_one"),
            (f"{D}:Scheduler.mistyped", f"{D}:Scheduler.not_this_one"),
        },
    ),
}

# Exactly these unresolved calls, with their reason.
FLOW_UNRESOLVED: dict[str, list[tuple[int, str, str, str]]] = {
    "param_typed_by_callers_not_other_function": [
        (19, f"{W}:never_called", "w.run", "unknown-type"),
        (23, f"{W}:from_outside", "w.run", "unknown-type"),
        (32, f"{W}:Tool.unbound", "w.run", "unknown-type"),
    ],
    "callable_stored_on_self_not_crossed": [
        (22, f"{O}:Owner.close", "self.cleanup", "unknown-type"),
        (46, f"{O}:Stranger.__init__", "super", "builtin"),
    ],
}


@pytest.mark.parametrize("name", sorted(FLOW_EXPECTED))
def test_flow_rule(name: str) -> None:
    case = Case(CASES_DIR / name)
    rule = FLOW_EXPECTED[name]
    assert_edges(case.graph(), rule.present, rule.absent, input_text=case.input_text())


@pytest.mark.parametrize("name", sorted(FLOW_UNRESOLVED))
def test_flow_unresolved_with_reason(name: str) -> None:
    case = Case(CASES_DIR / name)
    assert_unresolved(case.graph(), FLOW_UNRESOLVED[name], input_text=case.input_text())
