"""The plugin's runtime pieces: resolving names through decorators, extractors that never
force a device sync, and calls that raise, run in threads, or break an extractor."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest
from tracer_support import find_python

from sgtrace.names import QualName
from sgtrace.payload import extract, tracer
from sgtrace.tracer.events import Backend, Fact, Role
from sgtrace.tracer.launch import prepare_trace_dir, traced_environment
from sgtrace.tracer.load import Trace, load_trace
from sgtrace.tracer.selection import FactSpec, Moment, Probe, Selection, Transform

DECORATED = """
import functools

def wraps_it(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return func(*args, **kwargs)
    return wrapper

def hides_it(func):
    def wrapper(*args, **kwargs):
        return func(*args, **kwargs)
    return wrapper

def plain(): pass

class C:
    def method(self): pass
    @staticmethod
    def static(): pass
    @classmethod
    def klass(cls): pass
    @property
    def prop(self): return 1
    @wraps_it
    def wrapped(self): pass
    @hides_it
    def hidden(self): pass
    class Inner:
        def deep(self): pass
    def outer(self):
        def inner(): pass
        return inner
"""


@pytest.fixture(scope="module")
def decorated() -> types.ModuleType:
    module = types.ModuleType("demo_decorated")
    exec(DECORATED, module.__dict__)
    return module


@pytest.mark.parametrize(
    "qualname",
    ["plain", "C.method", "C.static", "C.klass", "C.prop", "C.wrapped", "C.Inner.deep"],
)
def test_resolve_finds_the_code_behind_decorators(
    decorated: types.ModuleType, qualname: str
) -> None:
    code, detail = tracer.resolve(decorated, qualname)
    assert code is not None, detail
    assert code.co_name == qualname.rsplit(".", 1)[-1]
    assert detail == f"<string>:{code.co_firstlineno}"


@pytest.mark.parametrize(
    ("qualname", "why"),
    [
        ("C.hidden", "C.hidden runs code named wrapper: a decorator without __wrapped__"),
        ("C.outer.<locals>.inner", "a function defined inside a function cannot be attached"),
        ("C.missing", "demo_decorated has no attribute 'C.missing'"),
        ("functools", "functools is a module, not a Python function"),
    ],
)
def test_resolve_says_why_it_cannot_attach(
    decorated: types.ModuleType, qualname: str, why: str
) -> None:
    assert tracer.resolve(decorated, qualname) == (None, why)


class DeviceTensor:
    is_cpu = False
    shape = (4,)

    def tolist(self) -> list[int]:
        raise AssertionError("reading a device tensor would force a sync")

    def __int__(self) -> int:
        raise AssertionError("reading a device tensor would force a sync")


@pytest.mark.parametrize(
    ("transform", "value", "expected"),
    [
        ("int", 3, 3),
        ("int", True, 1),
        ("int", DeviceTensor(), extract.MISSING),
        ("int", "3", extract.MISSING),
        ("float", 2, 2.0),
        ("bool", 1, extract.MISSING),
        ("str", "low-load", "low-load"),
        ("name", Role.VERIFY, "VERIFY"),
        ("name", 3, extract.MISSING),
        ("len", [1, 2], 2),
        ("len", 3, extract.MISSING),
        ("cpu_list", DeviceTensor(), extract.MISSING),
        ("cpu_list", [1, 2.5], [1, 2.5]),
        ("cpu_list", [[1]], extract.MISSING),
        ("cpu_list", [True], extract.MISSING),
    ],
)
def test_transforms_never_force_a_device_sync(
    transform: str, value: object, expected: object
) -> None:
    assert extract.TRANSFORMS[transform](value) == expected


SCRIPT_MODULE = """
import threading

class Holder:
    forward_ct = 7

    def work(self, n):
        return n * 2

    def fail(self):
        raise ValueError("bad")

class Broken:
    @property
    def tp_rank(self):
        raise RuntimeError("no rank")

    @property
    def size(self):
        raise KeyError("size")

    def check(self):
        return None

def in_thread(x):
    return x

def run():
    holder = Holder()
    holder.work(3)
    try:
        holder.fail()
    except ValueError:
        pass
    thread = threading.Thread(target=in_thread, args=(5,))
    thread.start()
    thread.join()
    Broken().check()
    Broken().check()
"""


def _spec(fact: Fact, path: str, transform: Transform, at: Moment = Moment.ENTRY) -> FactSpec:
    return FactSpec(fact, (tuple(path.split(".")),), transform, at)


SCRIPT_SELECTION = Selection(
    (
        Probe(
            QualName("demo", "Holder.work"),
            Role.OTHER,
            (
                _spec(Fact.BATCH_SIZE, "n", Transform.INT),
                _spec(Fact.NUM_STEPS, "return", Transform.INT, Moment.EXIT),
            ),
        ),
        Probe(QualName("demo", "Holder.fail"), Role.OTHER),
        Probe(QualName("demo", "in_thread"), Role.OTHER, (_spec(Fact.BATCH_SIZE, "x", Transform.INT),)),
        Probe(QualName("demo", "Broken.check"), Role.OTHER, (_spec(Fact.BATCH_SIZE, "self.size", Transform.INT),)),
    )
)  # fmt: skip


def trace_script(tmp_path: Path, python: str, backend: Backend) -> Trace:
    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / "demo.py").write_text(textwrap.dedent(SCRIPT_MODULE))
    out = prepare_trace_dir(tmp_path / "trace", SCRIPT_SELECTION, backend=backend)
    env = traced_environment(out, {**os.environ, "PYTHONPATH": str(modules)})
    done = subprocess.run([python, "-c", "import demo; demo.run()"], env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return load_trace(out)


def assert_script_trace(trace: Trace, error: str | None) -> None:
    seen = [
        (e.function.qualname, e.step, e.rank, e.facts.to_json(), e.error, e.thread == main)
        for main in [next(e.thread for e in trace.events if e.function.qualname == "Holder.work")]
        for e in trace.events
    ]
    assert seen == [
        ("Holder.work", 7, 0, {"batch_size": 3, "num_steps": 6}, None, True),
        ("Holder.fail", 7, 0, {}, error, True),
        ("in_thread", 7, 0, {"batch_size": 5}, None, False),
        ("Broken.check", 7, 0, {}, None, True),
        ("Broken.check", 7, 0, {}, None, True),
    ]
    assert sorted(note.text for note in trace.notes) == [
        "extractor batch_size of demo:Broken.check failed: KeyError('size') (reported once)",
        "reading step/rank from demo:Broken.check failed: RuntimeError('no rank') (reported once)",
    ]


def test_monitoring_backend_records_raises_threads_and_broken_extractors(
    tmp_path: Path, python312: str
) -> None:
    assert_script_trace(trace_script(tmp_path, python312, Backend.MONITORING), "ValueError")


def test_profile_backend_records_threads_and_broken_extractors(tmp_path: Path) -> None:
    """sys.setprofile reports a raise as a return: the call is recorded without its error."""
    assert_script_trace(trace_script(tmp_path, sys.executable, Backend.PROFILE), None)


UNINSTALL = """
import sys
import sgtrace_payload.tracer
import demo
demo.Holder().work(1)
sgtrace_payload.tracer.uninstall()
demo.Holder().work(2)
print(sys.getprofile(), [type(f).__name__ for f in sys.meta_path if "PostImport" in type(f).__name__])
"""


def run_module_traced(tmp_path: Path, backend: Backend, module, selection, code: str):
    """Run ``python -c code`` traced with ``backend``, the module ``(name, source)`` importable;
    the interpreter is 3.12+ for sys.monitoring (skipped when none is found)."""
    python = find_python((3, 12)) if backend is Backend.MONITORING else sys.executable
    if python is None:
        pytest.skip("no Python 3.12+ found (PATH, pyenv) for the sys.monitoring backend")
    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / f"{module[0]}.py").write_text(textwrap.dedent(module[1]))
    out = prepare_trace_dir(tmp_path / "trace", selection, backend=backend)
    env = traced_environment(out, {**os.environ, "PYTHONPATH": str(modules)})
    done = subprocess.run([python, "-c", code], env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    return done, out


@pytest.mark.parametrize("backend", [Backend.PROFILE, Backend.MONITORING])
def test_uninstall_stops_recording_and_removes_the_finder(tmp_path: Path, backend: Backend) -> None:
    done, out = run_module_traced(
        tmp_path, backend, ("demo", SCRIPT_MODULE), SCRIPT_SELECTION, UNINSTALL
    )
    assert (done.returncode, done.stdout) == (0, "None []\n"), done.stderr
    trace = load_trace(out)
    assert [(e.function.qualname, e.facts.batch_size) for e in trace.events] == [("Holder.work", 1)]


FACTS_MODULE = """
import enum

class Mode(enum.Enum):
    DECODE = 1

class Ratio(float):  # a float subclass, as numpy.float64 is
    pass

class Lens:
    is_cpu = True
    shape = (3,)

    def tolist(self):
        return [1, 2.5, Ratio(3.0)]

class Holder:
    missing_on_the_way = None
    steps = 3

    @property
    def width(self):
        raise AttributeError("not set yet")

def call(holder, mode, text, ratio, lens, flag, items):
    return len(items) * 10

def run():
    text = 'say "hi"\\\\ \\u00e9\\u4e2d\\n\\x01'
    call(Holder(), Mode.DECODE, text, 0.25, Lens(), True, [1, 2])
    call(Holder(), "EXTEND", 7, 1, [1, True], 0, ())
"""

FACTS_SELECTION = Selection(
    (
        Probe(
            QualName("facts_demo", "call"),
            Role.OTHER,
            (
                _spec(Fact.BATCH_SIZE, "lens.shape.0", Transform.INT),
                _spec(Fact.FORWARD_MODE, "mode", Transform.NAME),
                _spec(Fact.REASON, "text", Transform.STR),
                _spec(Fact.ACCEPT_LENGTH, "ratio", Transform.FLOAT),
                _spec(Fact.ACCEPT_LENGTHS, "lens", Transform.CPU_LIST),
                _spec(Fact.IS_VERIFY, "flag", Transform.BOOL),
                _spec(Fact.TOPK, "items", Transform.LEN),
                FactSpec(
                    Fact.NUM_STEPS,
                    (("holder", "missing_on_the_way", "steps"), ("holder", "steps")),
                    Transform.INT,
                ),
                _spec(Fact.DRAFT_WIDTH, "holder.width", Transform.INT),
                _spec(Fact.ACCEPTED_DRAFTS, "return", Transform.INT, Moment.EXIT),
            ),
        ),
    )
)


@pytest.mark.parametrize("backend", [Backend.PROFILE, Backend.MONITORING])
def test_facts_of_every_kind_are_written_as_read(tmp_path: Path, backend: Backend) -> None:
    """Index paths, a None on the way (the next candidate wins), a property that raises
    AttributeError (no fact, no note), every transform, and strings JSON must escape."""
    code = "import facts_demo; facts_demo.run()"
    done, out = run_module_traced(
        tmp_path, backend, ("facts_demo", FACTS_MODULE), FACTS_SELECTION, code
    )
    assert done.returncode == 0, done.stderr
    trace = load_trace(out)
    assert [e.facts.to_json() for e in trace.events] == [
        {
            "batch_size": 3,
            "forward_mode": "DECODE",
            "num_steps": 3,
            "topk": 2,
            "is_verify": True,
            "accept_lengths": [1.0, 2.5, 3.0],
            "accepted_drafts": 20,
            "reason": 'say "hi"\\ \u00e9\u4e2d\n\x01',
            "accept_length": 0.25,
        },
        {
            "forward_mode": "EXTEND",
            "num_steps": 3,
            "topk": 0,
            "accepted_drafts": 0,
            "accept_length": 1.0,
        },
    ]
    assert trace.notes == ()
