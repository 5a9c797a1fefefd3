"""basedpyright's call hierarchy as a second oracle of callees per call site.

A small Language Server Protocol client (stdlib ``json`` and ``subprocess``) starts
``basedpyright-langserver --stdio`` with the release's source root as its workspace, opens the
file and, for every function and method of it, asks ``textDocument/prepareCallHierarchy`` at the
function's name, then ``callHierarchy/outgoingCalls`` on the item. Each outgoing call names a
callee (file and the range of its name) and the ranges of the calls in the caller; a callee
inside the release becomes ``module:Qual.name`` by reading its file with ``ast``. Only ranges
that start at the last name of a call's callee (``b`` of ``a.b(...)``) count: basedpyright also
reports property reads, which are not call sites.

Calls outside any function (module and class bodies) are not asked: the call hierarchy starts
at a function.

    callees = ask_basedpyright(Path("~/.cache/sgtrace/sources/sglang-0.5.9"), "sglang/srt/x.py")
"""

from __future__ import annotations

import ast
import json
import subprocess
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import IO, Any
from urllib.parse import unquote, urlparse

from oracles import OracleCallee, call_positions

SERVER = ("basedpyright-langserver", "--stdio")
CLASS_KIND = 5  # SymbolKind.Class
SETTINGS = {
    "basedpyright.analysis": {
        "diagnosticMode": "openFilesOnly",
        "typeCheckingMode": "off",
        "autoSearchPaths": False,
        "useLibraryCodeForTypes": True,
    },
}


def basedpyright_version() -> str:
    return version("basedpyright")


class LspError(RuntimeError):
    """The server answered a request with an error, or stopped."""


class LspSession:
    """One language server over stdin/stdout: requests wait for their answer; the server's own
    requests (``workspace/configuration``, capability registration) get a minimal answer."""

    def __init__(self, command: tuple[str, ...], root: Path) -> None:
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        self.next_id = 0
        uri = root.resolve().as_uri()
        self.request(
            "initialize",
            {
                "processId": None,
                "rootUri": uri,
                "workspaceFolders": [{"uri": uri, "name": root.name}],
                "capabilities": {
                    "textDocument": {"callHierarchy": {}},
                    "workspace": {"configuration": True},
                },
            },
        )
        self.notify("initialized", {})

    def _send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode("utf-8")
        stdin: IO[bytes] = self.process.stdin  # type: ignore[assignment]
        stdin.write(f"Content-Length: {len(body)}\r\n\r\n".encode("ascii") + body)
        stdin.flush()

    def _receive(self) -> dict[str, Any]:
        stdout: IO[bytes] = self.process.stdout  # type: ignore[assignment]
        length = 0
        while True:
            header = stdout.readline()
            if not header:
                raise LspError(f"{SERVER[0]} stopped (exit status {self.process.poll()})")
            if header in (b"\r\n", b"\n"):
                break
            key, _, value = header.decode("ascii").partition(":")
            if key.strip().lower() == "content-length":
                length = int(value)
        message: dict[str, Any] = json.loads(stdout.read(length))
        return message

    def notify(self, method: str, params: object) -> None:
        self._send({"method": method, "params": params})

    def request(self, method: str, params: object) -> Any:
        self.next_id += 1
        ident = self.next_id
        self._send({"id": ident, "method": method, "params": params})
        while True:
            message = self._receive()
            if "method" in message and "id" in message:
                self._answer(message)
            elif message.get("id") == ident:
                if "error" in message:
                    raise LspError(f"{method}: {message['error'].get('message')}")
                return message.get("result")

    def _answer(self, message: dict[str, Any]) -> None:
        result: object = None
        if message["method"] == "workspace/configuration":
            items = message["params"]["items"]
            result = [SETTINGS.get(item.get("section", ""), {}) for item in items]
        self._send({"id": message["id"], "result": result})

    def close(self) -> None:
        try:
            self.request("shutdown", None)
            self.notify("exit", None)
            self.process.wait(timeout=10)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()


@dataclass
class Definitions:
    """``module:Qual.name`` of the functions and classes of the release's files, by the line
    and column of their name (jedi's full names leave out ``<locals>``; so do these)."""

    root: Path
    by_file: dict[Path, dict[tuple[int, int], tuple[str, bool]]] = field(default_factory=dict)

    def name_at(self, path: Path, line: int, column: int) -> tuple[str, bool] | None:
        if path not in self.by_file:
            self.by_file[path] = _definitions(path, _module_name(self.root, path))
        return self.by_file[path].get((line, column))


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _definitions(path: Path, module: str) -> dict[tuple[int, int], tuple[str, bool]]:
    """(line, UTF-16 column of the name) -> (``module:Qual.name``, is a class)."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    found: dict[tuple[int, int], tuple[str, bool]] = {}

    def visit(parent: ast.AST, prefix: str) -> None:
        for node in ast.iter_child_nodes(parent):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                qual = f"{prefix}{node.name}"
                found[(node.lineno, _name_column(lines[node.lineno - 1], node))] = (
                    f"{module}:{qual}",
                    isinstance(node, ast.ClassDef),
                )
                visit(node, qual + ".")
            else:
                visit(node, prefix)

    visit(ast.parse(source), "")
    return found


def _name_column(text: str, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> int:
    """UTF-16 column of the name after ``def``/``async def``/``class`` on the line."""
    start = len(text.encode("utf-8")[: node.col_offset].decode("utf-8"))
    keyword = "class" if isinstance(node, ast.ClassDef) else "def"
    at = text.index(node.name, text.index(keyword, start) + len(keyword))
    return _utf16(text[:at])


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _functions(path: Path) -> list[tuple[int, int]]:
    """(0-based line, UTF-16 column) of the name of every function and method of ``path``."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    return sorted(
        (node.lineno - 1, _name_column(lines[node.lineno - 1], node))
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    )


def _call_starts(source: str) -> set[tuple[int, int]]:
    """(0-based line, UTF-16 column) of the last name of every call's callee."""
    lines = source.splitlines()
    return {
        (line - 1, _utf16(lines[line - 1].encode("utf-8")[:column].decode("utf-8")))
        for line, column in call_positions(source)
    }


def _path(uri: str) -> Path:
    return Path(unquote(urlparse(uri).path))


def ask_basedpyright(root: Path, file: str) -> list[OracleCallee]:
    """The callees basedpyright's call hierarchy finds inside ``root`` for the calls of
    ``file``'s functions."""
    root = root.resolve()
    path = root / file
    source = path.read_text(encoding="utf-8")
    calls = _call_starts(source)
    definitions = Definitions(root)
    found: set[OracleCallee] = set()
    session = LspSession(SERVER, root)
    try:
        uri = path.as_uri()
        session.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": source}},
        )
        for line, column in _functions(path):
            position = {
                "textDocument": {"uri": uri},
                "position": {"line": line, "character": column},
            }
            for item in session.request("textDocument/prepareCallHierarchy", position) or []:
                outgoing = session.request("callHierarchy/outgoingCalls", {"item": item})
                for call in outgoing or []:
                    found |= _callees(call, calls, root, definitions)
    finally:
        session.close()
    return sorted(found, key=lambda c: (c.line, c.name))


def _callees(
    call: dict[str, Any], calls: set[tuple[int, int]], root: Path, definitions: Definitions
) -> set[OracleCallee]:
    target = call["to"]
    where = _path(target["uri"]).resolve()
    if where.suffix != ".py" or not where.is_relative_to(root):
        return set()
    start = target["selectionRange"]["start"]
    named = definitions.name_at(where, start["line"] + 1, start["character"])
    if named is None:
        return set()
    name, is_class = named
    is_class = is_class or target.get("kind") == CLASS_KIND
    return {
        OracleCallee(r["start"]["line"] + 1, name, is_class)
        for r in call["fromRanges"]
        if (r["start"]["line"], r["start"]["character"]) in calls
    }
