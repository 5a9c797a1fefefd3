"""The value facts of one module (``flow.py``): where locals are bound, which assignments reach a
line, calls of parameters, lambdas, and the protocol calls of ``for`` and ``with``."""

from __future__ import annotations

from textwrap import dedent

from sgtrace.graphs.collect import collect_module
from sgtrace.graphs.outline import outline_module
from sgtrace.graphs.spans import reaching
from sgtrace.graphs.summary import ParamCall, ValueExpr

SOURCE = dedent("""\
    def run(items, on_done, flag):
        worker = None
        if flag:
            worker = Fast()
        else:
            worker = Slow()
            worker.go()
        for index, item in enumerate(items):
            on_done(item)
        with Lock() as held:
            held.use()
        key = lambda r: r.rank()
        return [x for x in items if (y := x)]
    """)


def shape(value: ValueExpr) -> str:
    """A value expression written compactly: ``element(call enumerate(name items))``."""
    inner = ", ".join(shape(v) for v in value.inner)
    head = f"{value.kind.value} {value.text}".strip()
    return f"{head}({inner})" if inner else head


def test_bindings_of_each_local() -> None:
    info = collect_module(SOURCE, "app.run", "app/run.py", False).functions["run"]
    found = {
        name: [(b.line, b.block, [shape(v) for v in b.values]) for b in bindings]
        for name, bindings in info.bindings.items()
    }
    assert found == {
        "held": [(10, (2, 13), ["entered(call Lock)"])],
        "index": [(8, (8, 9), ["item 0(element(call enumerate(name items)))"])],
        "item": [(8, (8, 9), ["item 1(element(call enumerate(name items)))"])],
        "key": [(12, (2, 13), ["lambda run.<locals>.<lambda>"])],
        "worker": [(2, (2, 13), []), (4, (4, 4), ["call Fast"]), (6, (6, 7), ["call Slow"])],
        "x": [(13, (2, 13), ["element(name items)"])],
        "y": [(13, (2, 13), ["name x"])],
    }


def test_reaching_assignments_follow_the_path() -> None:
    worker = collect_module(SOURCE, "app.run", "app/run.py", False).functions["run"]
    bindings = worker.bindings["worker"]
    assert [b.line for b in reaching(bindings, 7)] == [6]  # inside the else branch
    assert [b.line for b in reaching(bindings, 10)] == [6, 4, 2]  # after the if: all
    assert [b.line for b in reaching(bindings, 3)] == [2]


def test_parameter_calls_lambdas_and_protocol_calls() -> None:
    summary = collect_module(SOURCE, "app.run", "app/run.py", False)
    run = summary.functions["run"]
    assert run.param_calls == (ParamCall("on_done", 9, "run"),)
    lam = summary.functions["run.<locals>.<lambda>"]
    assert (lam.line, [p.name for p in lam.params], [c.spelled for c in lam.calls]) == (
        12,
        ["r"],
        ["r.rank"],
    )
    implicit = [
        (c.line, c.spelled, c.implicit and c.implicit.value) for c in run.calls if c.implicit
    ]
    assert implicit == [
        (8, "enumerate(...).__iter__", "protocol"),
        (8, "enumerate(...).__next__", "protocol"),
        (10, "Lock(...).__enter__", "protocol"),
        (10, "Lock(...).__exit__", "protocol"),
    ]


def test_outline_holds_the_same_value_facts() -> None:
    full = collect_module(SOURCE, "app.run", "app/run.py", False)
    outline = outline_module(SOURCE, "app.run", "app/run.py", False)
    assert outline is not None
    for name in full.functions:
        got, want = outline.functions[name], full.functions[name]
        assert (got.bindings, got.param_calls, got.locals) == (
            want.bindings,
            want.param_calls,
            want.locals,
        )
