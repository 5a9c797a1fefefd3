"""The SGLang map: everything sgtrace knows about SGLang's internals, in one package.

* :mod:`~sgtrace.sglang.family`: the release families (:class:`Family`) and their first
  releases, as data;
* :mod:`~sgtrace.sglang.anchors`: every module, class and method name the hook and the tracer
  rely on, and the names that differ between families;
* :mod:`~sgtrace.sglang.locate`: the one site locator, used by the hook
  (:func:`sgtrace.hooks.sites.locate_sites`) and by the tracer's default selection;
* :mod:`~sgtrace.sglang.parts`: the functions the tracer records, found by the same locator.

The map sits above the graph engine (it asks the engine where things are) and below the hook
and the tracer. The code that runs inside SGLang cannot import it: what that code needs from the
map travels in the hook's JSON config (:meth:`sgtrace.hooks.spec.HookSpec.runtime_config`).
"""

from sgtrace.sglang.anchors import Part, expected_names, map_names
from sgtrace.sglang.family import Family, family_of_release
from sgtrace.sglang.locate import Located, locate
from sgtrace.sglang.parts import PartsFound, find_parts

__all__ = [
    "Family",
    "Located",
    "Part",
    "PartsFound",
    "expected_names",
    "family_of_release",
    "find_parts",
    "locate",
    "map_names",
]
