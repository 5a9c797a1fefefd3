"""The patch codemod: golden diffs of the toy releases, placement rules, refusals."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from hook_support import BATCH_SIZE_POLICY, CASES, toy_spec, toy_tree

from sgtrace.errors import HookSiteNotFoundError
from sgtrace.hooks.apply import plan_patch, render_diff
from sgtrace.hooks.inject import Insertion, inject_source

DECIDE = Insertion.after_call(
    "S.process", "process_batch_result_decode", "is_decode()", "on_decode_result"
)


@pytest.mark.parametrize("case", ["zero_step_states", "scheduler_mixins"])
def test_patch_diff_matches_golden(case: str, tmp_path: Path) -> None:
    tree = toy_tree(case, tmp_path)
    changes = plan_patch(tree.root, toy_spec(tree), BATCH_SIZE_POLICY)
    actual = render_diff([c for c in changes if not c.created])
    golden = CASES / case / "expected.diff"
    assert actual == golden.read_text(), (
        f"the patch of {case} changed; if intended, put this into {golden}:\n{actual}"
    )


def test_call_in_else_branch_or_elif_is_not_the_decode_site() -> None:
    source = textwrap.dedent(
        """\
        class S:
            def process(self, batch, result):
                if batch.forward_mode.is_extend():
                    self.process_batch_result_prefill(batch, result)
                elif batch.forward_mode.is_decode():
                    self.p.process_batch_result_decode(batch, result=result)
                else:
                    self.process_batch_result_decode(batch, result)
        """
    )
    assert inject_source(source, "s.py", [DECIDE], "sglang") == textwrap.dedent(
        """\
        from sglang import sgtrace_hook as _sgtrace_hook  # sgtrace-hook
        class S:
            def process(self, batch, result):
                if batch.forward_mode.is_extend():
                    self.process_batch_result_prefill(batch, result)
                elif batch.forward_mode.is_decode():
                    self.p.process_batch_result_decode(batch, result=result)
                    _sgtrace_hook.on_decode_result(batch, result)  # sgtrace-hook
                else:
                    self.process_batch_result_decode(batch, result)
        """
    )


def test_import_goes_after_docstring_and_future_imports() -> None:
    source = '"""Doc."""\nfrom __future__ import annotations\n\nimport os\n\n\nclass W:\n    def __init__(self):\n        pass\n'
    patched = inject_source(
        source, "w.py", [Insertion.at_end("W.__init__", "attach", "self")], "pkg"
    )
    assert patched.splitlines()[:4] == [
        '"""Doc."""',
        "from __future__ import annotations",
        "from pkg import sgtrace_hook as _sgtrace_hook  # sgtrace-hook",
        "",
    ]


def test_two_decode_calls_are_ambiguous() -> None:
    source = textwrap.dedent(
        """\
        class S:
            def process(self, batch, result):
                if batch.forward_mode.is_decode():
                    self.process_batch_result_decode(batch, result)
                    self.process_batch_result_decode(batch, result)
        """
    )
    with pytest.raises(HookSiteNotFoundError) as caught:
        inject_source(source, "s.py", [DECIDE], "sglang")
    assert str(caught.value) == (
        "cannot patch s.py: expected a single call to process_batch_result_decode under an `if` "
        "testing is_decode() in S.process, found 2; the source changed since the sites were "
        "located, locate them again"
    )


def test_attach_refuses_an_init_that_returns_early() -> None:
    source = "class W:\n    def __init__(self, x):\n        if x:\n            return\n        self.x = x\n"
    with pytest.raises(HookSiteNotFoundError) as caught:
        inject_source(source, "w.py", [Insertion.at_end("W.__init__", "attach", "self")], "pkg")
    assert str(caught.value) == (
        "W.__init__ has a return statement: a call added at its end could be skipped; "
        "this release needs another attach point"
    )


def test_returns_of_nested_functions_do_not_count() -> None:
    source = "class W:\n    def __init__(self):\n        def f():\n            return 1\n        self.f = f\n"
    patched = inject_source(source, "w.py", [Insertion.at_end("W.__init__", "attach", "self")], "p")
    assert patched.endswith(
        "        self.f = f\n        _sgtrace_hook.attach(self)  # sgtrace-hook\n"
    )


def test_windows_line_endings_survive() -> None:
    source = "class W:\r\n    def __init__(self):\r\n        self.x = 1\r\n"
    patched = inject_source(source, "w.py", [Insertion.at_end("W.__init__", "attach", "self")], "p")
    assert patched == (
        "from p import sgtrace_hook as _sgtrace_hook  # sgtrace-hook\r\n"
        "class W:\r\n    def __init__(self):\r\n        self.x = 1\r\n"
        "        _sgtrace_hook.attach(self)  # sgtrace-hook\r\n"
    )
