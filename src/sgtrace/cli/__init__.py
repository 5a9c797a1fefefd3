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
from collections.abc import Iterator, Mapping, MutableMapping

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


class LazyCommands(MutableMapping[str, click.Command]):
    """The commands of a click group, each imported from its `module:name` on first use."""

    def __init__(self, homes: Mapping[str, str]) -> None:
        self.homes = dict(homes)
        self.loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self.loaded:
            self.loaded[name] = pkgutil.resolve_name(self.homes[name])
        return self.loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self.homes.setdefault(name, "")
        self.loaded[name] = command

    def __delitem__(self, name: str) -> None:
        del self.homes[name]
        self.loaded.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self.homes  # without importing the command

    def __iter__(self) -> Iterator[str]:
        return iter(self.homes)

    def __len__(self) -> int:
        return len(self.homes)


@click.group(
    context_settings={"help_option_names": ["-h", "--help"]}, commands=LazyCommands(COMMANDS)
)
@click.option("--debug", is_flag=True, help="Show tracebacks instead of short error messages.")
@click.version_option(package_name="sgtrace")
def main(debug: bool) -> None:
    """Static and dynamic source tracing for SGLang internals."""


__all__ = ["main"]
