"""The hook's sites in an SGLang release, as a :class:`~sgtrace.hooks.spec.HookSpec`.

The decide and attach sites and the family are located by the SGLang map's locator
(:func:`sgtrace.sglang.locate.locate`), by structure; the switch is the plain off state's, at the
start of the scheduler method the map names (:mod:`sgtrace.sglang.plain_names`). The names the
payload looks up are the release's own (:func:`sgtrace.sglang.release_names.runtime_names_in`,
:func:`sgtrace.sglang.plain_names.plain_off_names_in`); a release that lacks one of the plain off
state's names gets no hook (it would switch half), and the error names what it lacks.
"""

from __future__ import annotations

from sgtrace.errors import HookSiteNotFoundError
from sgtrace.graphs.build import Project
from sgtrace.graphs.model import CallSite, Node
from sgtrace.graphs.source import SourceTree
from sgtrace.hooks.spec import HookSpec, Site, SiteKind
from sgtrace.names import QualName
from sgtrace.payload.config import PlainOffNames
from sgtrace.sglang.family import NEWEST_KNOWN, Family
from sgtrace.sglang.locate import locate
from sgtrace.sglang.plain_names import plain_off_names_in, where_lacking
from sgtrace.sglang.release_names import runtime_names_in


def locate_sites(tree: SourceTree, project: Project | None = None) -> HookSpec:
    """The :class:`HookSpec` of the release in ``tree``; raises :class:`HookSiteNotFoundError`.

    ``project`` may be passed to reuse a graph engine already built over ``tree`` (and its
    summary cache: ``sgtrace inject-hook --cache-dir/--no-cache``).
    """
    project = project if project is not None else Project(tree)
    found = locate(project, tree.label)
    plain = plain_names_of(tree)
    return HookSpec(
        tree.label,
        _site(SiteKind.DECIDE, found.decide),
        _at_start(SiteKind.SWITCH, _switch_node(project, plain, tree.label)),
        _at_end(SiteKind.ATTACH, found.attach),
        found.family,
        found.family_reason,
        found.hook_relies_on,
        runtime_names_in(tree.root),
        plain,
    )


def plain_names_of(tree: SourceTree) -> PlainOffNames:
    """The plain off state's names in the release at ``tree``; :class:`HookSiteNotFoundError`
    naming each one it lacks and where the map looks for it."""
    plain, lacking = plain_off_names_in(tree.root)
    if plain is None:
        raise HookSiteNotFoundError(
            f"{tree.label}: the hook's off state (SGLang's plain decode path) is not mapped on "
            f"this release, so no hook is written (it would switch half): it lacks "
            f"{where_lacking(lacking)}. sgtrace knows SGLang "
            f"{Family.SCHEDULER_MIXINS.first_release} to {NEWEST_KNOWN}; check the --source release"
        )
    return plain


def _switch_node(project: Project, plain: PlainOffNames, label: str) -> Node:
    name = QualName(plain.switch_module, plain.switch_qualname)
    node = project.node(name)
    if node is None:
        raise HookSiteNotFoundError(f"switch site: no {name.qualname} in {name.module} of {label}")
    return node


def _site(kind: SiteKind, call: CallSite) -> Site:
    return Site(kind, call.caller, call.callee, call.file, call.line, call.text, call.guard)


def _at_start(kind: SiteKind, node: Node) -> Site:
    short = node.name.qualname.rsplit(".", 1)[-1]
    return Site(kind, node.name, node.name, node.file, node.line, f"start of {short}", None)


def _at_end(kind: SiteKind, node: Node) -> Site:
    return Site(kind, node.name, node.name, node.file, node.line, "end of __init__", None)
