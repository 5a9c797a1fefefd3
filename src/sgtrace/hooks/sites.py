"""The hook's sites in an SGLang release, as a :class:`~sgtrace.hooks.spec.HookSpec`.

The sites, the family and the names the hook relies on are located by the SGLang map's locator
(:func:`sgtrace.sglang.locate.locate`), by structure; the names the payload looks up are the
release's own (:func:`sgtrace.sglang.release_names.runtime_names_in`,
:func:`sgtrace.sglang.plain_names.plain_off_names_in`); this module puts them in the hook's terms.
"""

from __future__ import annotations

from sgtrace.graphs.build import Project
from sgtrace.graphs.model import CallSite
from sgtrace.graphs.source import SourceTree
from sgtrace.hooks.spec import HookSpec, Site, SiteKind
from sgtrace.sglang.locate import locate
from sgtrace.sglang.plain_names import plain_off_names_in
from sgtrace.sglang.release_names import runtime_names_in


def locate_sites(tree: SourceTree, project: Project | None = None) -> HookSpec:
    """The :class:`HookSpec` of the release in ``tree``; raises :class:`HookSiteNotFoundError`.

    ``project`` may be passed to reuse a graph engine already built over ``tree`` (and its
    summary cache: ``sgtrace inject-hook --cache-dir/--no-cache``).
    """
    found = locate(project if project is not None else Project(tree), tree.label)
    attach = found.attach
    return HookSpec(
        tree.label,
        _site(SiteKind.DECIDE, found.decide),
        _site(SiteKind.SWITCH, found.switch),
        Site(
            SiteKind.ATTACH,
            attach.name,
            attach.name,
            attach.file,
            attach.line,
            "end of __init__",
            None,
        ),
        found.family,
        found.family_reason,
        found.hook_relies_on,
        runtime_names_in(tree.root),
        *plain_off_names_in(tree.root),
    )


def _site(kind: SiteKind, call: CallSite) -> Site:
    return Site(kind, call.caller, call.callee, call.file, call.line, call.text, call.guard)
