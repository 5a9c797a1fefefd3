"""sgtrace tracer plugin: records the calls of selected functions in this Python process.

``sgtrace trace`` writes this file as ``sgtrace_tracer.py`` into a bootstrap directory; the
directory's ``sitecustomize`` calls :func:`install` in every Python process started with it on
``PYTHONPATH``, SGLang's scheduler process per TP rank included. Stdlib only, Python 3.10+.

* Lazy: a ``sys.meta_path`` finder wraps the loader of each selected module; once the module
  has run, the selected functions' code objects are attached. Nothing is imported early.
* Backends, one protocol (``attach(code, probe)``, ``start()``, ``stop()``): ``sys.monitoring``
  (3.12+: events on the selected code objects only) or ``sys.setprofile`` (3.10/3.11).
* Each completed call is one JSON line ``os.write``-n to ``events-<pid>.jsonl``: no user-space
  buffer, so a process killed by SIGKILL loses nothing already recorded.
* ``listener(role, step, facts)`` (the deep-dive plugin's) sees every completed call.
"""

import json
import json.encoder
import numbers
import os
import sys
import threading
import time
from operator import attrgetter

_MISSING = object()
_RETURN = object()  # the source of a fact read from the return value
_ENCODE = json.JSONEncoder(separators=(",", ":")).encode
_ACTIVE = None  # (recorder, backend, watcher) once installed in this process
_now, _thread_id = time.perf_counter_ns, threading.get_ident


def _fact_encoder():
    """Encode a facts dict as compact JSON: one C encoder made once (``JSONEncoder.encode``
    makes a new one per call, which costs more than the encoding itself)."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return _ENCODE
    encoder = make(
        None, None, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True
    )
    return lambda value: "".join(encoder(value, 0))


_ENCODE_FACTS = _fact_encoder()


def _steps(path):
    """A path (attribute names; ints index, as ``shape.0``) as steps: runs of attribute names
    joined into one ``operator.attrgetter`` (a C call), ints kept."""
    steps = []
    for part in path:
        if part.__class__ is int or not steps or steps[-1].__class__ is int:
            steps.append(part)
        else:
            steps[-1] += "." + part
    return tuple(step if step.__class__ is int else attrgetter(step) for step in steps)


def _walk(obj, steps):
    """``obj`` read along ``steps``; ``_MISSING`` where an attribute or index is absent or a
    value on the way is None. Other errors (a property that raises) reach the caller."""
    for step in steps:
        if step.__class__ is int:
            try:
                obj = obj[step]
            except (IndexError, KeyError, TypeError):
                return _MISSING
        else:
            try:
                obj = step(obj)
            except AttributeError:
                return _MISSING
        if obj is None:
            return _MISSING
    return obj


def _path(parts):
    return _steps(int(part) if part.isdigit() else part for part in parts)


def _numbers(value):
    kinds = set(map(type, value))
    if kinds <= {int, float}:  # the common case, at C speed
        return True
    return all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value)


def _to_cpu_list(value):
    if getattr(value, "is_cpu", True) is False:  # a device tensor: reading it would sync
        return _MISSING
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, (list, tuple)) and len(value) <= 4096 and _numbers(value):
        return list(value)
    return _MISSING


def _str(value):
    return value if isinstance(value, str) else _MISSING


def _int(value):
    if value.__class__ is int:
        return value
    return int(value) if isinstance(value, numbers.Integral) else _MISSING


def _float(value):
    if value.__class__ is float:
        return value
    return float(value) if isinstance(value, numbers.Real) else _MISSING


_TRANSFORMS = {
    "int": _int,
    "float": _float,
    "bool": lambda v: v if isinstance(v, bool) else _MISSING,
    "str": _str,
    "name": lambda v: _str(v if isinstance(v, str) else getattr(v, "name", None)),
    "len": lambda v: len(v) if hasattr(v, "__len__") else _MISSING,
    "cpu_list": _to_cpu_list,
}


def _compile(spec):
    sources = tuple(
        (_RETURN if path[0] == "return" else path[0], _path(path[1:])) for path in spec["from"]
    )
    return spec["at"], (spec["fact"], sources, _TRANSFORMS[spec["as"]])


class _Probe:
    """A selected function: its name, role, compiled extractors, and code once attached."""

    __slots__ = ("name", "role", "entry", "exit", "code", "prefix", "has_facts")

    def __init__(self, config):
        self.name, self.role, self.code = config["name"], config["role"], None
        self.prefix = _ENCODE({"type": "call", "fn": self.name, "role": self.role})[:-1] + ","
        specs = [_compile(spec) for spec in config["facts"]]
        self.entry = tuple(spec for at, spec in specs if at == "entry")
        self.exit = tuple(spec for at, spec in specs if at == "exit")
        self.has_facts = bool(specs)


class _Recorder:
    """Turns enter/exit of selected calls into JSON lines, one ``os.write`` per line."""

    def __init__(self, out_dir, backend_name, step_paths, rank_paths):
        self.out_dir, self.backend_name = out_dir, backend_name
        self.step_paths, self.rank_paths = step_paths, rank_paths
        self.holder = self.step_path = self.rank = self.listener = None
        self.learning, self.failed, self.fd = True, set(), None
        self.open()

    def open(self):
        """(Re)open this process's file: at install and in the child after ``os.fork``."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        self.pid = os.getpid()
        self.stacks = {}
        path = os.path.join(self.out_dir, f"events-{self.pid}.jsonl")
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        version = ".".join(str(part) for part in sys.version_info[:3])
        argv, ppid = list(getattr(sys, "orig_argv", sys.argv)), os.getppid()
        header = dict(type="process", pid=self.pid, ppid=ppid, argv=argv, python=version)
        self.write(_ENCODE(dict(header, backend=self.backend_name)))

    def write(self, line):
        if self.fd is None:
            return
        try:
            os.write(self.fd, (line + "\n").encode())
        except OSError as exc:  # disk full, closed file: stop recording, never break the host
            self.fd = None
            sys.stderr.write(f"sgtrace: stopped recording in pid {self.pid}: {exc!r}\n")

    def note(self, text, to_stderr=False):
        self.write(_ENCODE({"type": "note", "text": text}))
        if to_stderr:
            sys.stderr.write(f"sgtrace: {text}\n")

    def enter(self, probe, frame):
        # f_locals builds a dict on 3.12 (a proxy on 3.13+): only when something reads it
        local = frame.f_locals if probe.has_facts or self.learning else None
        if self.learning:
            self._learn(probe, local.get("self"))
        facts = self._read(probe, probe.entry, local, None, {}) if probe.entry else None
        stack = self.stacks.get(_thread_id())
        if stack is None:
            stack = self.stacks[_thread_id()] = []
        stack.append((probe, local, facts, _now()))

    def exit(self, code, value, error):
        end = _now()
        tid = _thread_id()
        stack = self.stacks.get(tid)
        while stack:  # entries left by calls whose exit was not seen are dropped
            probe, local, facts, start = stack.pop()
            if probe.code is code:
                break
        else:
            return
        if probe.exit:
            facts = self._read(probe, probe.exit, local, value, facts or {})
        step = facts.pop("step", None) if facts else None
        if step is None and self.step_path is not None:
            step = _walk(self.holder, self.step_path)
            step = step if step.__class__ is int else None
        line = (
            f'{probe.prefix}"rank":{self.rank or 0},"step":{"null" if step is None else step},'
            f'"t0":{start},"dur":{end - start},"tid":{tid}'
        )
        if facts:
            line += ',"facts":' + _ENCODE_FACTS(facts)
        if error is not None:
            line += ',"error":' + _ENCODE(error)
        self.write(line + "}")
        if self.listener is not None:
            self.listener(probe.role, step, facts)

    def _read(self, probe, specs, local, value, out):
        for fact, candidates, transform in specs:
            try:
                for name, steps in candidates:
                    head = value if name is _RETURN else local.get(name)
                    if head is None:
                        continue
                    found = _walk(head, steps) if steps else head
                    if found is not _MISSING:
                        found = transform(found)
                        if found is not _MISSING:
                            out[fact] = found
                            break
            except Exception as exc:  # an extractor must never break the traced program
                self._fail((probe.name, fact), f"extractor {fact} of {probe.name} failed: {exc!r}")
        return out

    def _learn(self, probe, obj):
        try:
            if self.holder is None:
                found = [path for path in self.step_paths if type(_walk(obj, path)) is int]
                self.holder, self.step_path = (obj, found[0]) if found else (None, None)
            if self.rank is None:
                ranks = [r for r in (_walk(obj, p) for p in self.rank_paths) if type(r) is int]
                self.rank = ranks[0] if ranks else None
        except Exception as exc:  # a property that raises: never break the traced program
            self._fail((probe.name, "self"), f"reading step/rank from {probe.name} failed: {exc!r}")
        self.learning = self.holder is None or self.rank is None

    def _fail(self, key, text):
        if key not in self.failed:
            self.failed.add(key)
            self.note(text + " (reported once)")


class _MonitoringBackend:
    """``sys.monitoring``: PY_START/PY_RETURN on the selected code objects only. PY_UNWIND
    cannot be local (CPython 3.12, 3.13): it is global, and its callback, which then runs for
    every frame an exception leaves, is one set lookup for code not selected."""

    name = "monitoring"

    def __init__(self, recorder):
        self.codes, mon = {}, sys.monitoring
        free = [tool for tool in (4, 3) if mon.get_tool(tool) is None]  # 2 is viztracer's
        if not free:
            raise RuntimeError("sys.monitoring tool ids 3 and 4 are both in use")
        self.tool = free[0]
        mon.use_tool_id(self.tool, "sgtrace")
        codes, enter, exit_, frame_of = self.codes, recorder.enter, recorder.exit, sys._getframe

        def on_start(code, offset):
            probe = codes.get(code)
            if probe is not None:
                enter(probe, frame_of(1))

        def on_return(code, offset, value):
            if code in codes:
                exit_(code, value, None)

        def on_unwind(code, offset, exc):
            if code in codes:
                exit_(code, None, exc.__class__.__name__)

        mon.register_callback(self.tool, mon.events.PY_START, on_start)
        mon.register_callback(self.tool, mon.events.PY_RETURN, on_return)
        mon.register_callback(self.tool, mon.events.PY_UNWIND, on_unwind)

    def attach(self, code, probe):
        mon = sys.monitoring
        self.codes[code] = probe
        mon.set_local_events(self.tool, code, mon.events.PY_START | mon.events.PY_RETURN)
        mon.set_events(self.tool, mon.events.PY_UNWIND)

    def start(self):
        """Nothing to do: events flow once a code object is attached."""

    def stop(self):
        mon = sys.monitoring
        for code in self.codes:
            mon.set_local_events(self.tool, code, 0)
        mon.set_events(self.tool, 0)
        for event in (mon.events.PY_START, mon.events.PY_RETURN, mon.events.PY_UNWIND):
            mon.register_callback(self.tool, event, None)
        mon.free_tool_id(self.tool)


class _ProfileBackend:
    """``sys.setprofile`` in this thread and ``threading.setprofile`` for new ones. The hook
    runs for every call and return, C calls included, of every function: it does as little
    as it can for those not selected."""

    name = "profile"

    def __init__(self, recorder):
        self.rec, self.codes = recorder, {}
        codes, enter, exit_ = self.codes, recorder.enter, recorder.exit

        def hook(frame, event, arg):
            if event == "call":
                probe = codes.get(frame.f_code)
                if probe is not None:
                    enter(probe, frame)
            elif event == "return":
                code = frame.f_code
                if code in codes:
                    exit_(code, arg, None)

        self.hook = hook

    def attach(self, code, probe):
        self.codes[code] = probe

    def start(self):
        if sys.getprofile() is not None:
            self.rec.note("replaced the sys.setprofile function already installed", True)
        threading.setprofile(self.hook)
        sys.setprofile(self.hook)

    def stop(self):
        sys.setprofile(None)
        threading.setprofile(None)


class _LoaderProxy:
    """Runs the real loader (restored first: the module never sees the proxy), then reports."""

    def __init__(self, spec, loaded):
        self.spec, self.loader, self.loaded = spec, spec.loader, loaded

    def __getattr__(self, name):
        if name in ("spec", "loader", "loaded"):  # not set yet (copy, pickle)
            raise AttributeError(name)
        return getattr(self.loader, name)

    def exec_module(self, module):
        self.spec.loader = self.loader
        module.__loader__ = self.loader
        self.loader.exec_module(module)
        self.loaded(self.spec.name, module)


class _Watcher:
    """A ``sys.meta_path`` finder that reports when a module in ``pending`` has run."""

    def __init__(self, pending, loaded):
        self.pending, self.loaded = pending, loaded

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.pending:
            return None
        # only the finders after this one: two such wrappers (tracer and hook) asking each
        # other would recurse forever
        later = (
            sys.meta_path[sys.meta_path.index(self) + 1 :]
            if self in sys.meta_path
            else sys.meta_path
        )
        for finder in later:
            if finder is not self and hasattr(finder, "find_spec"):
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _LoaderProxy(spec, self.loaded)
        return spec


def _resolve(module, qualname):
    """The code object of ``qualname`` in ``module``, through decorators; or (None, why)."""
    obj = module
    for part in qualname.split("."):
        if part == "<locals>":
            return None, "a function defined inside a function cannot be attached"
        found = vars(obj).get(part, _MISSING) if isinstance(obj, type) else _MISSING
        obj = getattr(obj, part, _MISSING) if found is _MISSING else found
        if obj is _MISSING:
            return None, f"{module.__name__} has no attribute {qualname!r}"
    for _ in range(20):
        if isinstance(obj, (staticmethod, classmethod)):
            obj = obj.__func__
        elif isinstance(obj, property):
            obj = obj.fget
        elif getattr(obj, "__wrapped__", None) is not None:
            obj = obj.__wrapped__
        else:
            break
    code = getattr(obj, "__code__", None)
    if code is None:
        return None, f"{qualname} is a {type(obj).__name__}, not a Python function"
    if code.co_name != qualname.rsplit(".", 1)[-1]:
        return None, f"{qualname} runs code named {code.co_name}: a decorator without __wrapped__"
    return code, f"{code.co_filename}:{code.co_firstlineno}"


def _pick_backend(requested):
    if requested != "profile" and hasattr(sys, "monitoring"):
        return _MonitoringBackend, None
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    why = f"sys.monitoring needs Python 3.12+, this is {version}: using sys.setprofile"
    return _ProfileBackend, why if requested == "monitoring" else None


def install(config_path):
    """Install the tracer in this process, as configured by the JSON file ``config_path``."""
    global _ACTIVE
    if _ACTIVE is not None:
        return
    with open(config_path, encoding="utf-8") as fh:
        config = json.load(fh)
    backend_class, why = _pick_backend(config["backend"])
    paths = [[_path(p) for p in config[key]] for key in ("step_paths", "rank_paths")]
    out_dir = os.path.join(os.path.dirname(os.path.abspath(config_path)), config["out_dir"])
    recorder = _Recorder(os.path.normpath(out_dir), backend_class.name, *paths)
    if why:
        recorder.note(why, True)
    backend = backend_class(recorder)
    pending = {}
    for probe in map(_Probe, config["probes"]):
        pending.setdefault(probe.name.split(":", 1)[0], []).append(probe)

    def loaded(module_name, module):
        for probe in pending.pop(module_name, ()):
            code, detail = _resolve(module, probe.name.split(":", 1)[1])
            if code is not None and code in backend.codes:
                code, detail = None, f"same code as {backend.codes[code].name}"
            if code is not None:
                probe.code = code
                backend.attach(code, probe)
            attach = {"type": "attach", "fn": probe.name, "ok": code is not None}
            recorder.write(_ENCODE(dict(attach, detail=detail)))

    watcher = _Watcher(pending, loaded)
    for name in [name for name in pending if name in sys.modules]:
        loaded(name, sys.modules[name])
    sys.meta_path.insert(0, watcher)
    backend.start()
    os.register_at_fork(after_in_child=lambda: _ACTIVE and _ACTIVE[0].open())
    _ACTIVE = (recorder, backend, watcher)


def uninstall():
    """Undo :func:`install`: stop the backend, remove the finder, close the file."""
    global _ACTIVE
    if _ACTIVE is None:
        return
    recorder, backend, watcher = _ACTIVE
    _ACTIVE = None
    backend.stop()
    if watcher in sys.meta_path:
        sys.meta_path.remove(watcher)
    if recorder.listener is not None:
        recorder.listener.close()
    if recorder.fd is not None:
        os.close(recorder.fd)
        recorder.fd = None
