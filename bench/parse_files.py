"""Parse a list of Python files with one parser, sequentially: the floor under any analyser.

The benchmark runs this as a child process, once per parser and input, so that its time and
memory are measured the same way as the call-graph tools'. Files that do not parse are
counted, not fatal; the count goes to stderr as the last line.

Example::

    python bench/parse_files.py libcst files.txt
    # stderr: parsed 1404 files, 0 failed
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Callable
from pathlib import Path


def parse_with_libcst(source: bytes) -> object:
    """LibCST's native parser: the full concrete syntax tree sgtrace's visitors walk."""
    import libcst

    try:
        return libcst.parse_module(source)
    except libcst.ParserSyntaxError as exc:
        raise SyntaxError(str(exc).splitlines()[0]) from exc


def parse_with_ast(source: bytes) -> object:
    """The stdlib parser: an abstract tree, what pyan3 and JARVIS build on."""
    return ast.parse(source)


PARSERS: dict[str, Callable[[bytes], object]] = {"libcst": parse_with_libcst, "ast": parse_with_ast}


def parse_all(paths: list[Path], parse: Callable[[bytes], object]) -> int:
    """Parse every file in ``paths``; return how many failed to parse."""
    failed = 0
    for path in paths:
        try:
            parse(path.read_bytes())
        except (SyntaxError, ValueError) as exc:  # ValueError: a NUL byte in the source
            print(f"{path}: {exc}", file=sys.stderr)
            failed += 1
    return failed


def main() -> None:
    """Command line: ``parse_files.py {libcst,ast} LIST`` where LIST holds one path a line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("parser", choices=sorted(PARSERS))
    parser.add_argument("file_list", type=Path, help="a text file with one path a line")
    args = parser.parse_args()
    paths = [Path(line) for line in args.file_list.read_text().splitlines() if line.strip()]
    failed = parse_all(paths, PARSERS[args.parser])
    print(f"parsed {len(paths)} files, {failed} failed", file=sys.stderr)


if __name__ == "__main__":
    main()
