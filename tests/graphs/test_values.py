"""Values followed as data, one golden case each, stated edge by edge with their negatives.

Loop and unpacking variables, class attributes, call chains, flow-sensitive locals, dicts of
classes, functions passed, stored, returned and decorated, lambdas, ``functools.partial``,
dispatchers, protocol methods, dataclass initialisers and ``getattr`` with a run-time name.
"""

from __future__ import annotations

import pytest

from tests.graphs.golden import CASES_DIR, Case
from tests.graphs.helpers import Expect, assert_edges, assert_unresolved, expect

B, M = "app.batch", "app.model"
VALUE_EXPECTED: dict[str, Expect] = {
    "loop_variable_element_type": expect(
        {
            (f"{B}:Batch.finish_all", f"{M}:Req.finish", "element"),
            (f"{B}:Batch.run_all", f"{M}:Worker.run", "element"),
            (f"{B}:Batch.numbered", f"{M}:Req.finish", "element"),
            (f"{B}:Batch.paired", f"{M}:Worker.run", "element"),
        },
        {(f"{B}:Batch.run_all", f"{M}:Req.finish"), (f"{B}:Batch.finish_all", f"{M}:Worker.run")},
    ),
    "loop_variable_unknown_iterable_unresolved": expect(
        set(), {(f"{B}:finish_all", f"{M}:Req.finish")}
    ),
    "class_attribute_typed_by_assignment": expect(
        {
            ("app.use:configure", "app.environ:EnvField.get", "attribute-type"),
            ("app.use:configure", "app.environ:EnvInt.get", "attribute-type"),
        }
    ),
    "class_attribute_not_other_class": expect(
        {("app.use:configure", "app.environ:EnvBool.get", "attribute-type")},
        {("app.use:configure", "app.environ:EnvInt.get")},
    ),
    "self_attr_from_call_chain": expect(
        {
            ("app.engine:Engine.step", "app.parts:Streamer.stream", "factory"),
            ("app.engine:Engine.step", "app.parts:Pool.take"),
            ("app.engine:Engine.step", "app.engine:Accel.boost", "local"),
        }
    ),
    "local_type_flow_sensitive": expect(
        {
            ("app.results:run", "app.results:Embedding.copy_to_cpu", "local"),
            ("app.results:run", "app.results:Embedding.finish", "local"),
            ("app.results:run", "app.results:Generation.finish", "local"),
        },
        {("app.results:run", "app.results:Generation.copy_to_cpu")},
    ),
    "local_annotation_narrows_base": expect(
        {
            ("app.reasons:abort", "app.reasons:Abort.to_json", "annotation"),
            ("app.reasons:plain", "app.reasons:Reason.to_json", "annotation"),
        },
        {
            ("app.reasons:abort", "app.reasons:Reason.to_json"),
            ("app.reasons:plain", "app.reasons:Abort.to_json"),
        },
    ),
    "dict_of_classes_subscripted": expect(
        {
            ("app.worker:Worker.__init__", "app.runners:CudaRunner.__init__", "reference"),
            ("app.worker:Worker.__init__", "app.runners:CpuRunner.__init__", "reference"),
            ("app.worker:Worker.step", "app.runners:CudaRunner.replay", "reference"),
            ("app.worker:Worker.step", "app.runners:CpuRunner.replay", "reference"),
            ("app.worker:Worker.step", "app.runners:to_json", "reference"),
            ("app.worker:Worker.step", "app.runners:to_text", "reference"),
        },
        {("app.worker:Worker.step", "app.runners:Unrelated.replay")},
    ),
    "callable_passed_as_argument": expect(
        {
            ("app.server:retry", "app.server:Server.flush_cache", "argument"),
            ("app.server:apply", "app.server:double", "argument"),
        },
        {
            ("app.server:keep", "app.server:Server.unused"),
            ("app.server:retry", "app.server:double"),
        },
    ),
    "callable_stored_then_called": expect(
        {
            ("app.table:Table.pick", "app.table:alpha", "reference"),
            ("app.table:Table.pick", "app.table:alpha", "attribute-type"),
            ("app.table:Table.pick", "app.table:beta", "reference"),
            ("app.table:Table.pick", "app.table:Item.__init__", "reference"),
            ("app.table:Table.pick", "app.table:Table.pick.<locals>.<lambda>", "reference"),
        },
        {("app.table:Table.pick", "app.table:never_stored")},
    ),
    "dispatcher_calls_registered_handlers": expect(
        {
            ("app.scheduler:Scheduler.process", "app.utils:Dispatcher.__call__"),
            (
                "app.scheduler:Scheduler.process",
                "app.scheduler:Scheduler.handle_generate",
                "dispatch",
            ),
            ("app.scheduler:Scheduler.process", "app.scheduler:Scheduler.handle_abort", "dispatch"),
        },
        {("app.scheduler:Scheduler.process", "app.scheduler:Scheduler.not_registered")},
    ),
    "protocol_methods_implicit": expect(
        {
            ("app.proto:work", "app.proto:Lock.__enter__", "protocol"),
            ("app.proto:work", "app.proto:Lock.__exit__", "protocol"),
            ("app.proto:work", "app.proto:Bag.__iter__", "protocol"),
            ("app.proto:work", "app.proto:Bag.__next__", "protocol"),
            ("app.proto:work", "app.proto:Failure.__init__", "local"),
            ("app.proto:work", "app.proto:Scorer.__call__", "local"),
        },
    ),
    "dataclass_runs_post_init": expect(
        {
            ("app.config:make", "app.config:Config", "local"),
            ("app.config:make", "app.config:Config.__post_init__", "dataclass"),
            ("app.config:make", "app.config:Base.__init__", "local"),
        },
    ),
    "getattr_runtime_name_unresolved": expect(
        set(),
        {("app.handlers:handle", "app.handlers:Handlers.on_start")},
    ),
    "member_of_call_result": expect(
        {
            ("app.host:Host.start", "app.servers:Server.launch", "factory"),
            ("app.host:Host.send", "app.servers:Server.push", "factory"),
        },
        {("app.host:Host.send", "app.servers:Relay.push")},
    ),
    "module_name_bound_in_branches": expect(
        {
            ("app.host:Host.step", "app.real:OverlapMixin.drain", "mro"),
            ("app.host:make", "app.host:Tool.__init__", "local"),
        },
        {("app.host:make", "app.real:Tool.__init__")},
    ),
}

# Exactly these unresolved calls, with their reason.
VALUE_UNRESOLVED: dict[str, list[tuple[int, str, str, str]]] = {
    "loop_variable_unknown_iterable_unresolved": [
        (6, f"{B}:finish_all", "item.finish", "unknown-type"),
        (8, f"{B}:finish_all", "name.finish", "unknown-type"),
    ],
    "getattr_runtime_name_unresolved": [
        (10, "app.handlers:handle", "getattr", "builtin"),
        (10, "app.handlers:handle", "getattr(...)", "dynamic"),
    ],
    "member_of_call_result": [(17, "app.host:Host.send", "self.port.push", "unknown-type")],
}


@pytest.mark.parametrize("name", sorted(VALUE_EXPECTED))
def test_value_rule(name: str) -> None:
    case = Case(CASES_DIR / name)
    rule = VALUE_EXPECTED[name]
    assert_edges(case.graph(), rule.present, rule.absent, input_text=case.input_text())


@pytest.mark.parametrize("name", sorted(VALUE_UNRESOLVED))
def test_value_unresolved_with_reason(name: str) -> None:
    case = Case(CASES_DIR / name)
    assert_unresolved(case.graph(), VALUE_UNRESOLVED[name], input_text=case.input_text())


def test_dataclass_does_not_run_the_base_init() -> None:
    """`Config(2)` runs the generated __init__: the only Base.__init__ call is `Plain()`'s."""
    graph = Case(CASES_DIR / "dataclass_runs_post_init").graph()
    lines = sorted(s.line for s in graph.sites if str(s.callee) == "app.config:Base.__init__")
    assert lines == [23]


def test_flow_sensitive_local_keeps_the_other_branch_for_a_later_use() -> None:
    graph = Case(CASES_DIR / "local_type_flow_sensitive").graph()
    copies = sorted((s.line, str(s.callee)) for s in graph.sites if s.callee.short == "copy_to_cpu")
    assert copies == [(22, "app.results:Embedding.copy_to_cpu")]
