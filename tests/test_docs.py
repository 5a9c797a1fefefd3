"""docs/ shows what sgtrace produces now: pictures, CLI reference, console excerpts and links;
the README's commands are the ones CI and a new user run.

The generator is ``docs/build.py`` (``nox -s docs``); each test here regenerates one thing the way
``python docs/build.py --check`` does and compares it whole with what is committed. Pictures and
excerpts of SGLang releases download the release once (marked ``network``; cached in
``~/.cache/sgtrace``).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
README = REPO / "README.md"


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


def shown_pictures(pages: list[Path]) -> set[str]:
    """The names of the pictures ``pages`` show (``![...](img/NAME.svg)``)."""
    return {
        Path(target).stem
        for page in pages
        for target in LINK.findall(strip_code(page.read_text(encoding="utf-8")))
        if target.startswith("img/")
    }


def test_every_picture_file_belongs_to_a_picture_and_is_shown() -> None:
    """Call-graph pictures have a DOT and an SVG; live pictures an SVG only; each one is shown.

    docs/img holds the pictures of docs/, bench/results/img those of the lab book.
    """
    found = Counter(p.relative_to(REPO).with_suffix("").as_posix() for p in build.IMG.iterdir())
    found.update(p.relative_to(REPO).with_suffix("").as_posix() for p in build.LAB_IMG.iterdir())
    expected = Counter(
        {(build.IMG / p.name).relative_to(REPO).as_posix(): 2 for p in build.PICTURES}
    )
    expected.update(
        {p.path.relative_to(REPO).with_suffix("").as_posix(): 1 for p in build.LIVE_PICTURES}
    )
    not_shown = [p.name for p in build.PICTURES if p.name not in shown_pictures(PAGES)]
    not_shown += [p.name for p in build.LIVE_PICTURES if p.name not in shown_pictures(p.pages)]
    assert (found, not_shown) == (expected, [])


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
        for page in picture.pages
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


LINKED_PAGES = [
    *PAGES,
    README,
    build.LABBOOK,
    REPO / "bench" / "live" / "README.md",
    REPO / "bench" / "results" / "live" / "README.md",
    REPO / "bench" / "results" / "live" / "sweep" / "README.md",
]


@pytest.mark.parametrize(
    "page", [pytest.param(p, id=p.relative_to(REPO).as_posix()) for p in LINKED_PAGES]
)
def test_links_and_images_point_to_existing_files_and_headings(page: Path) -> None:
    assert broken_links(page) == []


RUN_NUMBER = re.compile(r"\bcalls? [0-9]")
# Pages exempt while another branch rewrites them; the test below fails as soon as an exempt
# page is clean, so an exemption cannot outlive its rewrite.
HISTORY_PENDING: set[str] = set()


def history_lines(page: Path) -> list[str]:
    """The lines of ``page`` that cite a run of the live benchmark by number ("call 21")."""
    return [
        f"{page.relative_to(REPO)}:{n}: {line.strip()}"
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
        if RUN_NUMBER.search(line)
    ]


def test_the_docs_state_what_is_true_now_and_leave_history_to_the_lab_book() -> None:
    """No "call 21" or "calls 13-15" in the README or docs/: runs are the lab book's."""
    pages = [README, *(p for p in PAGES if p.name not in HISTORY_PENDING)]
    found = [line for page in pages for line in history_lines(page)]
    assert found == [], "move the history to bench/results/LABBOOK.md and link it"
    clean = sorted(n for n in HISTORY_PENDING if not history_lines(DOCS / n))
    assert clean == [], "these pages are clean now: drop them from HISTORY_PENDING"


def fenced_block_after(text: str, phrase: str) -> str:
    """The body of the first fenced code block after the first ``phrase``."""
    rest = text[text.index(phrase) :]
    return FENCE.search(rest)[0].split("\n", 1)[1].rsplit("```", 1)[0]


def test_ci_runs_the_readmes_test_command() -> None:
    """.ci/run runs, byte for byte, the test command the README gives (CI runs what users run)."""
    readme = fenced_block_after(README.read_text(encoding="utf-8"), "Run the tests")
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").rstrip("\n").splitlines()[-1]
    command = [line for line in readme.splitlines() if not line.startswith("#")]
    assert command == [ci]
    assert '-m "not live"' in ci  # the network tests are selected explicitly


def sgtrace_env() -> dict[str, str]:
    """The environment with this Python's ``sgtrace`` script first on PATH."""
    scripts = Path(sys.executable).parent
    return {**os.environ, "PATH": f"{scripts}{os.pathsep}{os.environ['PATH']}"}


@pytest.mark.network
def test_the_readmes_main_job_runs() -> None:
    """The README's first set-up command: install, then a call graph of SGLang 0.5.9."""
    block = fenced_block_after(README.read_text(encoding="utf-8"), "Run the main job")
    (line,) = [line for line in block.splitlines() if line.strip()]
    install, _, command = line.partition(" && ")
    assert install == "pip install ."  # installing is the caller's (CI installs with [test])
    done = subprocess.run(
        ["bash", "-c", command], cwd=REPO, env=sgtrace_env(), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    # the focus and the decode handler it calls, in the mixin of another file
    assert "\nScheduler.process_batch_result  managers/scheduler.py:" in done.stdout
    assert ": SchedulerOutputProcessorMixin.process_batch_result_decode  [mro]" in done.stdout


def test_the_readmes_recorded_trace_commands_run_without_a_gpu(tmp_path: Path) -> None:
    """The README's way to try validate and report on the recorded trace works as written."""
    block = fenced_block_after(README.read_text(encoding="utf-8"), "Try `validate` and `report`")
    env = sgtrace_env()
    outputs = []
    for line in block.replace("/tmp/sgtrace-try", str(tmp_path)).splitlines():
        if line.strip() and not line.startswith("#"):
            command = line.split("  #")[0]
            done = subprocess.run(
                ["bash", "-c", command], cwd=REPO, env=env, capture_output=True, text=True
            )
            assert done.returncode == 0, f"{command}\n{done.stderr}"
            outputs.append(done.stdout)
    assert outputs[1] == (
        "OK: 1908 steps on rank 0 (1910 decisions) hold the on/off rules, agree across ranks "
        "and follow the policy.\n"
    )
    ET.fromstring((tmp_path / "report.svg").read_text(encoding="utf-8"))


def test_slugs_follow_the_code_host_rule() -> None:
    page = "# Why\n## sgtrace's own call graph\n### SGLang 0.5.9\n## `sgtrace find`\n## Why\n"
    assert slugs(page) == {"why", "sgtraces-own-call-graph", "sglang-059", "sgtrace-find", "why-1"}
