"""The ``sgtrace`` command line: thin commands over the library.

Each command parses its options, calls one library function, prints, and turns
:class:`~sgtrace.errors.SgtraceError` (could not run: exit 2) and
:class:`~sgtrace.errors.ProblemFound` (found a problem: exit 1) into messages; ``--debug``
re-raises for a traceback.

A command's module is imported only when that command runs (or when help lists them all):
``sgtrace callgraph`` does not load the tracer, and a warm run stays a fraction of a second.
"""

from __future__ import annotations

import pkgutil

import click

COMMANDS = {
    "callgraph": "sgtrace.cli.static:callgraph",
    "find": "sgtrace.cli.static:find",
    "inject-hook": "sgtrace.cli.hook:inject_hook",
    "launch": "sgtrace.cli.hook:launch",
    "trace": "sgtrace.cli.runtime:trace",
    "validate": "sgtrace.cli.runtime:validate",
    "report": "sgtrace.cli.runtime:report",
}  # command name -> where it is defined, `module:name`


class LazyGroup(click.Group):
    """A click group whose commands are imported from their `module:name` on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        home = COMMANDS.get(name)
        return pkgutil.resolve_name(home) if home else None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks instead of short error messages.")
@click.version_option(package_name="sgtrace")
def main(debug: bool) -> None:
    """Static and dynamic source tracing for SGLang internals."""


__all__ = ["main"]
