"""The runtime names of one SGLang release, read from its source: where the map gives a field
alternatives (:func:`~sgtrace.sglang.runtime_names.alternatives`), the first the release defines.

The hook's config carries these (:meth:`sgtrace.hooks.spec.HookSpec.runtime_config`), so the
payload looks up each name where the release has it, with no version test: the decision carrier
wraps ``SchedulerRequestReceiver.recv_requests`` from 0.5.13 and ``Scheduler.recv_requests``
before, where the scheduler received its requests itself.

>>> import tempfile, pathlib
>>> root = pathlib.Path(tempfile.mkdtemp())
>>> (root / "sglang/srt/managers").mkdir(parents=True)
>>> _ = (root / "sglang/srt/managers/scheduler.py").write_text(
...     "from sglang.srt.utils import broadcast_pyobj\\n"
...     "class Scheduler:\\n    def recv_requests(self):\\n        return []\\n")
>>> names = runtime_names_in(root)
>>> names.receiver_module, names.receiver_class, names.broadcast_requests
('sglang.srt.managers.scheduler', 'Scheduler', 'broadcast_pyobj')
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from sgtrace.payload.config import SglangNames
from sgtrace.sglang.defined import defines
from sgtrace.sglang.runtime_names import alternatives, first_names, runtime_names


def runtime_names_in(root: Path) -> SglangNames:
    """The names the payload is given on the release at ``root``: the map's names, and for a
    field with alternatives the first the release defines (the first alternative where it
    defines none, as :func:`~sgtrace.sglang.runtime_names.runtime_names` gives). A field with
    one name has it on every release: only the alternatives are read, a few ``ast`` parses."""
    several = [entry for entries in alternatives().values() for entry in entries]
    chosen = first_names(several, lambda entry: defines(root, entry))
    return dataclasses.replace(runtime_names(), **chosen)
