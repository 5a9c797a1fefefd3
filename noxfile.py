"""Developer tasks for sgtrace: ``nox -l`` lists them, ``nox`` runs tests and lint.

Each session gets a venv of its own (``.nox/<session>``). With ``nox --no-venv`` (or
``-db none``) sessions run in the current environment instead and install nothing: the
environment must already have ``pip install -e .[test]``.

    nox -s tests -- -k callgraph     # arguments after -- go to pytest
    nox -s lint
    nox -s docs                      # redraw docs/img, regenerate docs/cli.md and the excerpts
    nox -s bench                     # writes bench/results/*; then the checks of bench/checks
    nox -s update-golden             # rewrite tests/graphs golden files after a reviewed change

A plain ``pytest`` runs offline (pyproject.toml's addopts deselect the ``network``, ``releases``
and ``live`` markers); ``nox -s tests`` runs what CI runs (``.ci/run``), the release downloads
included.
"""

from __future__ import annotations

from pathlib import Path

import nox

nox.options.default_venv_backend = "venv"
nox.options.reuse_venv = "yes"
nox.options.sessions = ["tests", "lint"]

ROOT = Path(__file__).resolve().parent
LINT_TOOLS = ("ruff>=0.6", "import-linter>=2.1")
# Other call-graph tools for the benchmark, pinned; each gets a venv of its own.
BENCH_TOOLS = {"pyan3": "pyan3==2.9.0", "jarviscg": "jarviscg==0.1.0rc7"}


def install(session: nox.Session, *requirements: str) -> None:
    """``session.install`` in a venv; a no-op without one (``--no-venv``: use what is there)."""
    if session.venv_backend == "none":
        session.log(f"no venv: not installing {' '.join(requirements)}; using the current env")
        return
    session.install(*requirements)


CI_MARKERS = "not live"  # what CI selects: everything but the GPU tests (.ci/run, the README)


@nox.session
def tests(session: nox.Session) -> None:
    """Run the test suite as CI does: with the tests that download SGLang releases, without GPU.

    The first run downloads 19 SGLang releases (about 838 MB) into ~/.cache/sgtrace; later runs
    reuse them. ``nox -s tests -- -m "not live and not network"`` runs offline.
    """
    install(session, "-e", ".[test]")
    session.run("python", "-m", "pytest", "-m", CI_MARKERS, *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff lint and format check, and the import-linter layers contract from pyproject.toml."""
    install(session, "-e", ".", *LINT_TOOLS)
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("lint-imports")


@nox.session(name="update-golden")
def update_golden(session: nox.Session) -> None:
    """Rewrite the golden files of tests/graphs from the current output; review the diff."""
    install(session, "-e", ".[test]")
    session.run("pytest", "tests/graphs", "--update-golden", *session.posargs)


@nox.session
def docs(session: nox.Session) -> None:
    """Regenerate docs/: the call-graph pictures, docs/cli.md, the console excerpts and the
    module table (docs/build.py; ``nox -s docs -- --check`` only compares)."""
    install(session, "-e", ".")
    session.run("python", str(ROOT / "docs" / "build.py"), *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Time and peak memory of sgtrace, libcst, ast, pyan3 and JARVIS on SGLang 0.5.9.

    Writes bench/results/static.md and static.csv, then tracer.* (the tracer's cost per call),
    hook.* (the speculation hook's cost per decode step), policy.* (each speculation policy
    on the live crossover plan's loads, simulated on machines built from the live measurements),
    policy_stream.* (the same policies and machines in closed loops of clients, steady and
    changing: loads the policies were not tuned on), policy_vs_live.md (those machines beside
    the live fixed-work calls they can replay),
    trace_scale.* (reading a trace of up to a million events) and oracle.* (callees per call
    site against jedi and basedpyright's call hierarchy, on 0.5.9 and 0.5.23), then runs
    bench/checks: what the recorded live sweeps conclude and the host monitor's timing.
    Arguments after ``--`` go to bench/static_bench.py, e.g.
    ``nox -s bench -- --only 'sgtrace/*' --package-timeout-s 900``.
    """
    install(session, "-e", ".[test]")
    tools = {
        name: tool_venv(session, name, requirement) for name, requirement in BENCH_TOOLS.items()
    }
    session.run(
        "python",
        str(ROOT / "bench" / "static_bench.py"),
        *(arg for name, exe in tools.items() for arg in (f"--{name}", str(exe))),
        *session.posargs,
    )
    session.run("python", str(ROOT / "bench" / "tracer_bench.py"))  # bench/results/tracer.*
    session.run("python", str(ROOT / "bench" / "hook_bench.py"))  # bench/results/hook.*
    session.run("python", str(ROOT / "bench" / "policy_bench.py"))  # bench/results/policy.*
    # bench/results/policy_stream.*: the policies in closed loops they were not tuned on
    session.run("python", str(ROOT / "bench" / "policy_stream_bench.py"))
    # bench/results/policy_vs_live.md: the simulation beside the live fixed-work calls
    vs_live = ROOT / "bench" / "results" / "policy_vs_live.md"
    session.run("python", str(ROOT / "bench" / "policy_vs_live.py"), "--md", str(vs_live))
    # bench/results/trace_scale.*: load, validate, merge, report on up to a million events
    session.run("python", str(ROOT / "bench" / "trace_scale_bench.py"))
    install(session, "jedi==0.20.0", "basedpyright==1.40.2")  # the oracles of oracle_bench.py
    session.run("python", str(ROOT / "bench" / "oracle_bench.py"))  # bench/results/oracle.*
    run_bench_checks(session)


@nox.session(name="bench-checks")
def bench_checks(session: nox.Session) -> None:
    """Only bench/checks: what the recorded live sweeps conclude, the host monitor's timing."""
    install(session, "-e", ".[test]")
    run_bench_checks(session)


def run_bench_checks(session: nox.Session) -> None:
    """bench/checks with pytest, from the repository root (they import tests.bench helpers)."""
    session.run("python", "-m", "pytest", "-p", "no:cacheprovider", "bench/checks")


def tool_venv(session: nox.Session, executable: str, requirement: str) -> Path:
    """A venv under .nox/.cache holding only ``requirement``; returns its ``executable``.

    Kept apart from the session's venv so that the tools' dependencies cannot change what
    sgtrace runs with. Reused while the pinned requirement is unchanged.
    """
    venv = Path(session.cache_dir) / "bench-tools" / requirement.replace("==", "-")
    exe = venv / "bin" / executable
    if not exe.exists():
        session.run("python", "-m", "venv", "--clear", str(venv), external=True)
        session.run(
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            requirement,
            external=True,
        )
    return exe
