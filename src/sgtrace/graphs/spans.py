r"""The lines a statement or a statement list spans, and a statement's own expressions (not
those of the statements nested in it): what the value-flow recorder scopes its facts by.

>>> import ast

from sgtrace.graphs.summary import Binding
>>> tree = ast.parse("if x:\n    y = f(a)\n    z = 1\n")
>>> block_of(tree.body[0].body), [ast.unparse(e) for e in own_expressions(tree.body[0])]
((2, 3), ['x'])
"""

from __future__ import annotations

import ast

from sgtrace.graphs.summary import Binding


def lines_of(node: ast.stmt) -> tuple[int, int]:
    return node.lineno, node.end_lineno or node.lineno


def block_of(body: list[ast.stmt]) -> tuple[int, int]:
    """The lines a statement list spans."""
    if not body:
        return 0, 0
    return body[0].lineno, body[-1].end_lineno or body[-1].lineno


def own_expressions(node: ast.stmt) -> list[ast.expr]:
    """The expressions of a statement itself, not those of the statements nested in it."""
    found: list[ast.expr] = []
    for field, value in ast.iter_fields(node):
        if field in ("body", "orelse", "finalbody", "handlers", "cases", "decorator_list"):
            continue
        if isinstance(value, ast.expr):
            found.append(value)
        elif isinstance(value, list):
            found.extend(v for v in value if isinstance(v, ast.expr))
            found.extend(i.context_expr for i in value if isinstance(i, ast.withitem))
    return found


def reaching(bindings: tuple[Binding, ...], line: int) -> list[Binding]:
    """The assignments of a local that may give its value on ``line``: the latest one before
    it whose block encloses the line, and those after that one in other blocks (branches)."""
    found = []
    for binding in sorted((b for b in bindings if b.line <= line), key=lambda b: -b.line):
        found.append(binding)
        if binding.block[0] <= line <= binding.block[1]:
            break
    return found
