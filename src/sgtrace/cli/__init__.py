"""The ``sgtrace`` command line: thin commands over the library.

Each command parses its options, calls one library function, prints, and turns
:class:`~sgtrace.errors.SgtraceError` (could not run: exit 2) and
:class:`~sgtrace.errors.ProblemFound` (found a problem: exit 1) into messages; ``--debug``
re-raises for a traceback.
"""

from __future__ import annotations

import click

from sgtrace.cli.hook import inject_hook, launch
from sgtrace.cli.runtime import report, trace, validate
from sgtrace.cli.static import callgraph, find


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks instead of short error messages.")
@click.version_option(package_name="sgtrace")
def main(debug: bool) -> None:
    """Static and dynamic source tracing for SGLang internals."""


for _command in (callgraph, find, inject_hook, launch, trace, validate, report):
    main.add_command(_command)

__all__ = ["main"]
