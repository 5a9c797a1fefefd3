"""The sort keys of the model order names, call sites and unresolved calls as their classes do.

A graph of a whole package sorts tens of thousands of each; the keys compare plain tuples of
strings (in C) instead of calling the dataclasses' ``__lt__`` for every comparison.
"""

from __future__ import annotations

import itertools

from sgtrace.graphs.model import (
    CallSite,
    Unresolved,
    UnresolvedCall,
    name_key,
    site_order,
    unresolved_order,
)
from sgtrace.names import QualName

NAMES = [QualName(m, q) for m in ("a", "a.b", "a_b", "b") for q in ("<module>", "f", "C.f", "C")]


def test_name_key_orders_as_qualname() -> None:
    assert sorted(NAMES, key=name_key) == sorted(NAMES)


def test_site_order_orders_as_callsite() -> None:
    sites = [
        CallSite(file, line, caller, callee, text, guard, how)
        for file, line, (caller, callee), text, guard, how in itertools.product(
            ("a.py", "a/b.py"),
            (2, 10),
            [(NAMES[0], NAMES[5]), (NAMES[5], NAMES[0]), (NAMES[9], NAMES[9])],
            ("f()", "g()"),
            (None,),
            ("import", "local"),
        )
    ]
    guarded = [CallSite("a.py", 3, NAMES[1], NAMES[2], "f()", g, "mro") for g in ("x", "y")]
    sites += guarded
    assert sorted(sites, key=site_order) == sorted(sites)


def test_unresolved_order_orders_as_unresolvedcall() -> None:
    calls = [
        UnresolvedCall(file, line, caller, spelled, reason, detail)
        for file, line, caller, spelled, reason, detail in itertools.product(
            ("a.py", "b.py"),
            (1, 7),
            NAMES[::5],
            ("len", "self.x.y"),
            (Unresolved.BUILTIN, Unresolved.UNKNOWN_TYPE, Unresolved.EXTERNAL),
            ("", "torch.cuda"),
        )
    ]
    assert sorted(calls, key=unresolved_order) == sorted(calls)
