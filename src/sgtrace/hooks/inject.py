"""The libcst codemod of ``inject-hook --mode patch``: calls to ``sgtrace_hook`` in SGLang's source.

Two statements and one import per file, placed by structure (never by line number):

* decide site: right after the decode-result call in ``Scheduler.process_batch_result``, inside
  its ``is_decode()`` branch, ``_sgtrace_hook.on_decode_result(batch, result)`` with the very
  argument expressions of that call;
* attach site: as the last statement of ``EAGLEWorkerV2.__init__``,
  ``_sgtrace_hook.attach(self)``;
* at the top of each file (after the docstring and ``__future__`` imports),
  ``from sglang import sgtrace_hook as _sgtrace_hook``.

Every inserted line ends with the marker comment ``# sgtrace-hook``; a file that carries it is
already patched, so a second run changes nothing. Pure: texts in, texts out (``apply.py`` does
the file I/O).

>>> src = "class W:\\n    def __init__(self):\\n        self.x = 1\\n"
>>> print(inject_source(src, "m.py", [Insertion.at_end("W.__init__", "attach", "self")], "pkg"))
from pkg import sgtrace_hook as _sgtrace_hook  # sgtrace-hook
class W:
    def __init__(self):
        self.x = 1
        _sgtrace_hook.attach(self)  # sgtrace-hook
<BLANKLINE>
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

import libcst as cst

from sgtrace.errors import HookSiteNotFoundError

MARKER = "# sgtrace-hook"
ALIAS = "_sgtrace_hook"


class Placement(Enum):
    """Where an inserted statement goes inside its function."""

    AFTER_CALL = "after-call"  # after the one statement calling `anchor`, under `guard`
    AT_END = "at-end"  # as the last statement of the function body


@dataclass(frozen=True)
class Insertion:
    """Insert ``_sgtrace_hook.<function>(<args>)`` into the function ``qualname`` of a module.

    For :attr:`Placement.AFTER_CALL` the arguments are copied from the anchor call when ``args``
    is empty.
    """

    qualname: str
    placement: Placement
    function: str
    args: str = ""
    anchor: str = ""
    guard: str = ""

    @classmethod
    def after_call(cls, qualname: str, anchor: str, guard: str, function: str) -> Insertion:
        """After the statement calling ``anchor`` (short name) under an ``if`` testing ``guard``."""
        return cls(qualname, Placement.AFTER_CALL, function, anchor=anchor, guard=guard)

    @classmethod
    def at_end(cls, qualname: str, function: str, args: str) -> Insertion:
        """As the last statement of ``qualname``'s body."""
        return cls(qualname, Placement.AT_END, function, args=args)


def is_patched(text: str) -> bool:
    """True when ``text`` already carries the hook's marker."""
    return MARKER in text


def inject_source(text: str, path: str, insertions: Sequence[Insertion], package: str) -> str:
    """``text`` with the import and every insertion made; raises when a site is missing."""
    module = cst.parse_module(text)
    injector = SpecDecodeHookInjector(module, insertions)
    patched = module.visit(injector)
    missing = [ins for ins in insertions if injector.done.get(ins.qualname, 0) != 1]
    if missing:
        ins = missing[0]
        found = injector.done.get(ins.qualname, 0)
        what = (
            f"a single call to {ins.anchor} under an `if` testing {ins.guard}"
            if ins.placement is Placement.AFTER_CALL
            else "the function"
        )
        raise HookSiteNotFoundError(
            f"cannot patch {path}: expected {what} in {ins.qualname}, found {found}; "
            "the source changed since the sites were located, locate them again"
        )
    import_line = cst.parse_statement(f"from {package} import sgtrace_hook as {ALIAS}  {MARKER}\n")
    body = list(patched.body)
    index = _import_index(body)
    body.insert(index, import_line)
    return patched.with_changes(body=body).code


def _import_index(body: Sequence[cst.BaseStatement]) -> int:
    """Index after the module docstring and ``from __future__`` imports."""
    index = 0
    for stmt in body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            break
        first = stmt.body[0]
        is_doc = (
            index == 0
            and isinstance(first, cst.Expr)
            and isinstance(first.value, (cst.SimpleString, cst.ConcatenatedString))
        )
        is_future = (
            isinstance(first, cst.ImportFrom)
            and isinstance(first.module, cst.Name)
            and first.module.value == "__future__"
        )
        if not (is_doc or is_future):
            break
        index += 1
    return index


class SpecDecodeHookInjector(cst.CSTTransformer):
    """Inserts the hook's calls into the functions named by ``insertions``.

    Tracks the qualified name of the function being visited (``Class.method``); ``done`` counts
    insertions per function, which must end at exactly 1.
    """

    def __init__(self, module: cst.Module, insertions: Sequence[Insertion]) -> None:
        super().__init__()
        self.module = module
        self.by_function = {ins.qualname: ins for ins in insertions}
        self.stack: list[str] = []
        self.ifs: list[str] = []
        self.done: dict[str, int] = {}

    @property
    def current(self) -> str:
        return ".".join(self.stack)

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.stack.append(node.name.value)
        return True

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        self.stack.pop()
        return updated

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.stack.append(node.name.value)
        ins = self.by_function.get(self.current)
        if ins is not None and ins.placement is Placement.AT_END and _returns_early(node):
            raise HookSiteNotFoundError(
                f"{self.current} has a return statement: a call added at its end could be "
                "skipped; this release needs another attach point"
            )
        return True

    def leave_FunctionDef(
        self, original: cst.FunctionDef, updated: cst.FunctionDef
    ) -> cst.FunctionDef:
        ins = self.by_function.get(self.current)
        self.stack.pop()
        if ins is None or ins.placement is not Placement.AT_END:
            return updated
        if not isinstance(updated.body, cst.IndentedBlock):
            return updated
        line = _call_line(ins.function, ins.args)
        self.done[ins.qualname] = self.done.get(ins.qualname, 0) + 1
        return updated.with_changes(body=updated.body.with_changes(body=[*updated.body.body, line]))

    def visit_If(self, node: cst.If) -> bool:
        self.ifs.append(self.module.code_for_node(node.test))
        return True

    def leave_If(self, original: cst.If, updated: cst.If) -> cst.If:
        self.ifs.pop()
        return updated

    def visit_If_orelse(self, node: cst.If) -> None:
        self.ifs.append(f"not ({self.ifs[-1]})")

    def leave_If_orelse(self, node: cst.If) -> None:
        self.ifs.pop()

    def leave_IndentedBlock(
        self, original: cst.IndentedBlock, updated: cst.IndentedBlock
    ) -> cst.IndentedBlock:
        ins = self.by_function.get(self.current)
        if ins is None or ins.placement is not Placement.AFTER_CALL:
            return updated
        test = self.ifs[-1] if self.ifs else ""
        if ins.guard not in test or test.startswith("not ("):
            return updated
        body: list[cst.BaseStatement] = []
        for stmt in updated.body:
            body.append(stmt)
            call = _called(stmt, ins.anchor)
            if call is not None:
                args = ", ".join(self.module.code_for_node(arg.value) for arg in call.args)
                body.append(_call_line(ins.function, args))
                self.done[ins.qualname] = self.done.get(ins.qualname, 0) + 1
        return updated.with_changes(body=body)


def _called(stmt: cst.BaseStatement, short: str) -> cst.Call | None:
    """The call of ``...short(...)`` that makes up ``stmt``, if it is one."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    expr = stmt.body[0]
    if not isinstance(expr, cst.Expr) or not isinstance(expr.value, cst.Call):
        return None
    func = expr.value.func
    name = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", None)
    return expr.value if name == short else None


def _call_line(function: str, args: str) -> cst.SimpleStatementLine:
    stmt = cst.parse_statement(f"{ALIAS}.{function}({args})  {MARKER}\n")
    assert isinstance(stmt, cst.SimpleStatementLine)
    return stmt


class _ReturnFinder(cst.CSTVisitor):
    def __init__(self) -> None:
        self.found = False

    def visit_Return(self, node: cst.Return) -> None:
        self.found = True

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False  # nested functions return on their own

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False


def _returns_early(node: cst.FunctionDef) -> bool:
    finder = _ReturnFinder()
    node.body.visit(finder)
    return finder.found
