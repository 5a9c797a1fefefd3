"""docs/ shows what sgtrace produces now: pictures, CLI reference, console excerpts and links.

The generator is ``docs/build.py`` (``nox -s docs``); each test here regenerates one thing the way
``python docs/build.py --check`` does and compares it whole with what is committed. Pictures and
excerpts of SGLang releases download the release once (marked ``network``; cached in
``~/.cache/sgtrace``).
"""

from __future__ import annotations

import importlib.util
import re
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from sgtrace.cli import main as sgtrace_main

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"


def load_build() -> ModuleType:
    """``docs/build.py`` as a module (docs/ is not a package; nothing is added to sys.path)."""
    spec = importlib.util.spec_from_file_location("docs_build", DOCS / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build = load_build()
PAGES = sorted(DOCS.glob("*.md"))
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *$", re.M)
PLANNED = re.compile(r"<!-- planned: ([\w-]+) -->")


def assert_same_text(path: Path, generated: str) -> None:
    """Fail with a unified diff and the command to run when ``path`` differs from ``generated``."""
    committed = path.read_text(encoding="utf-8") if path.is_file() else ""
    mismatch = build.Mismatch(path, committed, generated)
    if committed != generated:
        pytest.fail(
            f"{path.relative_to(REPO)} is out of date: {build.REGENERATE}\n{mismatch.diff()}",
            pytrace=False,
        )


def network_marks(needs_network: bool) -> list[pytest.MarkDecorator]:
    return [pytest.mark.network] if needs_network else []


def picture_params() -> list:
    return [
        pytest.param(p, id=p.name, marks=network_marks(p.needs_network)) for p in build.PICTURES
    ]


@pytest.mark.parametrize("picture", picture_params())
def test_picture_dot_matches_what_sgtrace_draws_now(picture) -> None:
    assert_same_text(build.IMG / f"{picture.name}.dot", build.picture_dot(picture))


def dot_node_names(dot: str) -> set[str]:
    return set(re.findall(r'^"([^"]+)" \[label=', dot, re.M))


def svg_node_names_and_texts(svg: str) -> tuple[set[str], list[str]]:
    ns = {"svg": "http://www.w3.org/2000/svg"}
    root = ET.fromstring(svg)
    nodes = {g.find("svg:title", ns).text for g in root.iterfind(".//svg:g[@class='node']", ns)}
    texts = [" ".join((t.text or "").split()) for t in root.iterfind(".//svg:text", ns)]  # nbsp too
    return nodes, texts


@pytest.mark.parametrize("picture", [pytest.param(p, id=p.name) for p in build.PICTURES])
def test_picture_svg_is_drawn_from_the_committed_dot(picture) -> None:
    """The SVG has the DOT's nodes and the caption naming the release and the command."""
    dot_path, svg_path = build.IMG / f"{picture.name}.dot", build.IMG / f"{picture.name}.svg"
    assert svg_path.is_file(), f"{svg_path.relative_to(REPO)} is missing: {build.REGENERATE}"
    nodes, texts = svg_node_names_and_texts(svg_path.read_text(encoding="utf-8"))
    caption = [
        " ".join(line.split())
        for line in [f"{picture.release}: {picture.title}", *build.wrap_command(picture.command)]
    ]
    assert (nodes, texts[: len(caption)]) == (
        dot_node_names(dot_path.read_text(encoding="utf-8")),
        caption,
    ), f"{svg_path.relative_to(REPO)} was not drawn from {dot_path.name}: {build.REGENERATE}"


def shown_pictures() -> set[str]:
    """The names of the pictures the pages show (``![...](img/NAME.svg)``)."""
    return {
        Path(target).stem
        for page in PAGES
        for target in LINK.findall(strip_code(page.read_text(encoding="utf-8")))
        if target.startswith("img/")
    }


def test_every_picture_file_belongs_to_a_picture_and_is_shown() -> None:
    """Call-graph pictures have a DOT and an SVG; live pictures an SVG only; each one is shown."""
    names = {p.name for p in build.PICTURES} | {p.name for p in build.LIVE_PICTURES}
    files = Counter(p.stem for p in build.IMG.iterdir())
    expected = Counter({p.name: 2 for p in build.PICTURES})
    expected.update({p.name: 1 for p in build.LIVE_PICTURES})
    assert (files, shown_pictures() & names) == (expected, names)


@pytest.mark.parametrize("picture", [pytest.param(p, id=p.name) for p in build.LIVE_PICTURES])
def test_live_picture_is_an_svg_captioned_with_its_command(picture) -> None:
    """A live picture is not redrawn; its recording is committed and its caption names the command.

    The caption is the paragraph right after the image on every page that shows it.
    """
    ET.fromstring(picture.path.read_text(encoding="utf-8"))  # well-formed SVG
    assert (REPO / picture.recorded).is_file()
    image = re.compile(
        r"!\[[^\]]*\]\(img/" + re.escape(picture.name) + r"\.svg\)\n\n([^\n]+(?:\n[^\n]+)*)"
    )
    captions = [
        " ".join(caption.split())
        for page in PAGES
        for caption in image.findall(page.read_text(encoding="utf-8"))
    ]
    assert captions, f"no page shows img/{picture.name}.svg"
    assert [c for c in captions if f"`{picture.command}`" not in c] == []


def test_cli_reference_is_generated_from_the_click_commands() -> None:
    assert_same_text(DOCS / "cli.md", build.render_cli_reference())


def page_params() -> list:
    params = []
    for name in build.PAGES_REFRESHED:
        commands = build.console_commands((DOCS / name).read_text(encoding="utf-8"))
        params.append(
            pytest.param(name, id=name, marks=network_marks(any("==" in c for c in commands)))
        )
    return params


@pytest.mark.parametrize("page", page_params())
def test_console_excerpts_and_tables_are_current(page: str) -> None:
    """Each ``$ sgtrace ...`` block holds that command's output now; the module table is current."""
    path = DOCS / page
    assert_same_text(path, build.refresh_page(path.read_text(encoding="utf-8")))


def test_pages_call_planned_only_what_is_not_built() -> None:
    """A ``<!-- planned: NAME -->`` marker goes stale the day the command lands."""
    built = set(sgtrace_main.list_commands(None))
    stale = sorted(
        f"{page.name}: sgtrace {name}"
        for page in PAGES
        for name in PLANNED.findall(page.read_text(encoding="utf-8"))
        if name in built or name not in build.PLANNED_COMMANDS
    )
    assert stale == [], (
        "marked planned but built (or unknown): update the section and drop the marker"
    )


def strip_code(markdown: str) -> str:
    """``markdown`` without code blocks and code spans, where brackets are code, not links."""
    return INLINE_CODE.sub("", FENCE.sub("", markdown))


def slugs(markdown: str) -> set[str]:
    """The anchors a code host gives the headings of a page (GitHub's rule, duplicates numbered)."""
    seen: Counter[str] = Counter()
    found = set()
    for heading in HEADING.findall(FENCE.sub("", markdown)):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        found.add(slug if not seen[slug] else f"{slug}-{seen[slug]}")
        seen[slug] += 1
    return found


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in LINK.findall(strip_code(page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        path = (page.parent / file).resolve() if file else page
        if not path.exists():
            broken.append(f"{target} (no such file)")
        elif (
            anchor
            and path.suffix == ".md"
            and anchor not in slugs(path.read_text(encoding="utf-8"))
        ):
            broken.append(f"{target} (no such heading)")
    return broken


@pytest.mark.parametrize("page", [pytest.param(p, id=p.name) for p in PAGES])
def test_links_and_images_point_to_existing_files_and_headings(page: Path) -> None:
    assert broken_links(page) == []


def test_slugs_follow_the_code_host_rule() -> None:
    page = "# Why\n## sgtrace's own call graph\n### SGLang 0.5.9\n## `sgtrace find`\n## Why\n"
    assert slugs(page) == {"why", "sgtraces-own-call-graph", "sglang-059", "sgtrace-find", "why-1"}
