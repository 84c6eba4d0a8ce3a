"""Reading a prime-rl TOML: its bytes and their parse, and the small accessors every rule uses.

TOML dates and times become ISO strings so a config can travel as JSON. Errors (ToolFailure):
``config_not_found`` (missing, unreadable), ``bad_arguments`` (a folder, FIFO or device given as
the config, or a file over :data:`MAX_CONFIG_BYTES`), ``invalid_toml`` (with line and column; nesting deeper than
:data:`MAX_NESTING`).
"""

from __future__ import annotations

import datetime as dt
import functools
import itertools
import os
import re
import stat
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import ParseError

from tools.errors import FieldProblem, ToolFailure, call, fail

_TOML_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")
_EXAMPLES = call("mf_list_examples")


#: A config is kilobytes; anything larger is refused before it is read (bytes).
MAX_CONFIG_BYTES = 1024 * 1024
#: Tables, arrays and inline tables nested deeper than this are refused (prime-rl configs nest < 10).
MAX_NESTING = 64


#: Entries of a folder passed as a config path that are looked at for .toml files to name instead, and
#: how many of those are read to find one that is a prime-rl config.
_FOLDER_SCAN = 1000
_FOLDER_READS = 20
#: Top-level tables of which a prime-rl config (RL or SFT) has at least one.
_PRIME_RL_TABLES = ("model", "trainer", "orchestrator", "inference", "deployment", "data", "ckpt")
#: The bundled example named where a path is not a config file: it exists wherever these tools are installed.
SMOKE_EXAMPLE = "basic/reverse-text/rl"


def _config_in(folder: Path) -> tuple[Path | None, int]:
    """The first .toml file of ``folder`` (by name) that is a prime-rl config (a regular file up to
    :data:`MAX_CONFIG_BYTES` that parses and has one of :data:`_PRIME_RL_TABLES`), and how many .toml
    files the folder holds (of its first :data:`_FOLDER_SCAN` entries). A stray TOML (a pyproject.toml,
    a broken file) is never the one named."""
    try:
        with os.scandir(folder) as entries:
            tomls = sorted(e.name for e in itertools.islice(entries, _FOLDER_SCAN)
                           if e.name.endswith(".toml") and e.is_file())
    except OSError:
        return None, 0
    for name in tomls[:_FOLDER_READS]:
        try:
            data = parse_toml_text(read_bounded(folder / name), folder / name)[1]
        except ToolFailure:
            continue
        if any(isinstance(data.get(table), dict) for table in _PRIME_RL_TABLES):
            return folder / name, len(tomls)
    return None, len(tomls)


def _not_a_file(path: Path, folder: bool, argument: str) -> ToolFailure:
    """``bad_arguments`` for a config path that is a folder (naming a prime-rl config in it, when it has
    one) or another file that is not regular (a FIFO, device or socket: never read, it could block or never
    end). The fix names only what exists and works: that config's path, or a bundled example id."""
    examples = (f"or a bundled example id such as {SMOKE_EXAMPLE}: {_EXAMPLES} lists them, mf_prepare_config copies "
                "one to edit.")
    if folder:
        found, tomls = _config_in(path)
        inside = (f"e.g. {found} (a prime-rl config in that folder)" if found else
                  f"not a folder (its {tomls} .toml file{'s are' if tomls > 1 else ' is'} not a prime-rl config)"
                  if tomls else "not a folder")
        return fail("bad_arguments", f"{path} is a folder, not a config file.",
                    f"Pass the path of a .toml file, {inside}, {examples}", next_calls=[_EXAMPLES],
                    fields=[FieldProblem(path=argument, problem="must be a .toml file, not a folder")])
    return fail("bad_arguments", f"{path} is not a regular file (a pipe, device or socket); it was not read.",
                f"Pass the path of a .toml file (text from a pipe or a <(...) substitution: write it to a file "
                f"first), {examples}", next_calls=[_EXAMPLES],
                fields=[FieldProblem(path=argument, problem="must be a regular .toml file, not a pipe or device")])


def read_bounded(path: Path, limit: int = MAX_CONFIG_BYTES, argument: str = "config_path") -> bytes:
    """The bytes of ``path``, which must be a regular file of at most ``limit`` bytes: checked on
    the opened file (non-blocking, so a FIFO cannot hang the open) before reading, and at most
    ``limit + 1`` bytes are read, so a file growing meanwhile is refused too. Every tool reads a
    config path through here. Raises ToolFailure ``config_not_found`` (missing, unreadable) or
    ``bad_arguments`` (a folder, FIFO, device or socket, or larger than ``limit``: the message says its
    size; ``argument`` is the input field that named the path, for ``fields``)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except (FileNotFoundError, NotADirectoryError):
        raise fail("config_not_found", f"Config file not found: {path}",
                   f"Check the path, or make one from a bundled example: {_EXAMPLES} lists them, "
                   "mf_prepare_config copies one.", next_calls=[_EXAMPLES]) from None
    except IsADirectoryError:
        raise _not_a_file(path, True, argument) from None
    except OSError as exc:
        raise fail("config_not_found", f"Config file {path} cannot be read: {exc.strerror}",
                   "Check the file's permissions, then call again.") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise _not_a_file(path, stat.S_ISDIR(info.st_mode), argument)
    with os.fdopen(fd, "rb") as handle:
        if info.st_size > limit:
            raise _too_large(path, info.st_size, limit, argument)
        try:
            raw = handle.read(limit + 1)
        except OSError as exc:
            raise fail("config_not_found", f"Config file {path} cannot be read: {exc.strerror}",
                       "Check the file, then call again.") from None
    if len(raw) > limit:
        raise _too_large(path, None, limit, argument)
    return raw


def _too_large(path: Path, size: int | None, limit: int, argument: str) -> ToolFailure:
    """``bad_arguments`` for a file too large to be a config: it exists and may be readable, but it is
    not what the argument should name (``size`` None: its size was not known before reading)."""
    how = f"{size / 1e6:,.1f} MB ({size:,} bytes)" if size is not None else f"more than {limit:,} bytes long"
    return fail("bad_arguments", f"{path} is {how}, larger than {limit:,} bytes: a config is a few kilobytes, so it "
                "was not read.", "Pass the path of the prime-rl .toml config itself.",
                fields=[FieldProblem(path=argument, problem=f"must be a config file of at most {limit:,} bytes")])


def _invalid(path: Path, line: int, column: int, problem: str, fix: str, *, at_end: bool = False) -> Exception:
    """``invalid_toml`` for ``problem`` at ``line``/``column`` (1-based), located in the message and
    in ``fields`` (``path:line:column``); ``at_end``: that is where the document ends."""
    where = f"at line {line}, column {column}" + (", where the document ends" if at_end else "")
    return fail("invalid_toml", f"Invalid TOML in {path}: {problem} ({where})", fix,
                fields=[FieldProblem(path=f"{path}:{line}:{column}", problem=f"{problem} ({where})")])


def _line_column(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of character ``offset`` of ``text``."""
    line_start = text.rfind("\n", 0, offset) + 1
    return text.count("\n", 0, offset) + 1, offset - line_start + 1


def _byte_line_column(raw: bytes, offset: int) -> tuple[int, int]:
    """1-based line and column (in characters, the bad byte one of them) of byte ``offset`` of ``raw``."""
    line_start = raw.rfind(b"\n", 0, offset) + 1
    return raw.count(b"\n", 0, offset) + 1, len(raw[line_start:offset].decode("utf-8", "replace")) + 1


def _deepest_at(text: str) -> int:
    """The offset where nesting first goes deeper than :data:`MAX_NESTING` (0 when the scan cannot
    tell): arrays and inline tables opened, plus the parts of the current table header and of the
    key being assigned, outside strings and comments. A scan for the error's location only: the
    parse decides whether the document is too deep."""
    depth = header = key = 0
    i, n, at_line_start = 0, len(text), True
    while i < n:
        c = text[i]
        if c in "\"'":
            quote = text[i:i + 3] if text[i:i + 3] in ('"""', "'''") else c
            i = text.find(quote, i + len(quote)) if c == "'" else _basic_end(text, i + len(quote), quote)
            if i < 0:
                return 0
            i += len(quote)
            at_line_start = False
            continue
        if c == "#":
            i = text.find("\n", i)
            i = n if i < 0 else i
            continue
        if c == "\n":
            key, at_line_start = 0, True
        elif c == "[" and at_line_start and depth == 0:  # a table header: its dotted parts set the base depth
            close = text.find("]", i)
            name = text[i:close if close > 0 else n].strip("[ \t")
            header = name.count(".") + 1 + (1 if text.startswith("[[", i) else 0)
            i = text.find("\n", i)
            i = n if i < 0 else i
            continue
        elif c == "=" and depth == 0:
            line = text[text.rfind("\n", 0, i) + 1:i]
            key = line.count(".") + 1
        elif c in "[{":
            depth += 1
        elif c in "]}":
            depth = max(0, depth - 1)
        if not c.isspace():
            at_line_start = False
        if header + key + depth > MAX_NESTING:
            return i
        i += 1
    return 0


def _basic_end(text: str, i: int, quote: str) -> int:
    """The offset of the ``quote`` closing a basic string whose body starts at ``i`` (escapes skipped)."""
    while True:
        j = text.find(quote, i)
        if j < 0:
            return -1
        backslashes = len(text[i:j]) - len(text[i:j].rstrip("\\"))
        if backslashes % 2 == 0:
            return j
        i = j + 1


def _too_deep(path: Path, text: str) -> Exception:
    line, column = _line_column(text, _deepest_at(text))
    return _invalid(path, line, column, f"tables, arrays or inline tables are nested more than {MAX_NESTING} levels "
                    "deep", "A prime-rl config nests a few levels; fix the file, then validate again.")


def _depth_ok(value: Any) -> bool:
    """True when no table or array in ``value`` is nested deeper than :data:`MAX_NESTING` (iterative)."""
    stack = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_NESTING:
            return False
        if isinstance(node, dict):
            stack += [(v, depth + 1) for v in node.values()]
        elif isinstance(node, list):
            stack += [(v, depth + 1) for v in node]
    return True


def parse_toml_text(raw: bytes, path: Path) -> tuple[str, dict[str, Any]]:
    """``raw`` decoded (UTF-8, a leading BOM dropped) and parsed with tomllib, dates as ISO strings.

    Raises ToolFailure ``invalid_toml``, always with a line and column (in the message and in
    ``fields`` as ``path:line:column``): a binary file (NUL bytes), UTF-16 text, bytes that are not
    UTF-8, a syntax error (tomllib's position; "at end of document" becomes the end's line and
    column), or nesting deeper than :data:`MAX_NESTING` (where the nesting goes too deep)."""
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise _invalid(path, 1, 1, "UTF-16 text (it starts with a UTF-16 byte order mark); TOML is UTF-8",
                       "Save the file as UTF-8.")
    nul = raw.find(b"\x00")
    if nul >= 0:
        raise _invalid(path, *_byte_line_column(raw, nul), "a NUL byte: this is a binary file, not a TOML config",
                       "Pass the path of the prime-rl .toml config itself.")
    try:
        text = raw.decode("utf-8-sig")  # a leading BOM is not an error
    except UnicodeDecodeError as exc:
        bad = raw[exc.start:exc.start + 1].hex()
        raise _invalid(path, *_byte_line_column(raw, exc.start), f"not UTF-8 text: byte 0x{bad} ({exc.reason})",
                       "Save the file as UTF-8.") from None
    try:
        data = tomllib.loads(text)
    except RecursionError:
        raise _too_deep(path, text) from None
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        where = _TOML_POSITION.search(message)
        line, column = (int(where[1]), int(where[2])) if where else _line_column(text, len(text))
        problem = _TOML_POSITION.sub("", message).replace("(at end of document)", "").strip()
        raise _invalid(path, line, column, problem, "Fix the TOML syntax at the line and column given, then validate "
                       "again.", at_end=where is None) from None
    if not _depth_ok(data):
        raise _too_deep(path, text)
    return text, _jsonable(data)


def read_config(path: Path, argument: str = "config_path") -> tuple[bytes, dict[str, Any]]:
    """The bytes of ``path`` (:func:`read_bounded`: a regular file of at most
    :data:`MAX_CONFIG_BYTES`; ``argument`` names the input field that gave it) and their parse
    (:func:`parse_toml_text`). Raises ToolFailure ``config_not_found`` / ``bad_arguments`` /
    ``invalid_toml``."""
    raw = read_bounded(path, argument=argument)
    return raw, parse_toml_text(raw, path)[1]


def parse_document(text: str, path: Path) -> tomlkit.TOMLDocument:
    """``text`` parsed with tomlkit (for edits that keep comments and layout). Raises ToolFailure
    ``invalid_toml`` (tomlkit reports deep nesting as a parse error)."""
    try:
        return tomlkit.parse(text)
    except (ParseError, RecursionError) as exc:
        raise fail("invalid_toml", f"Invalid TOML in {path}: {exc}"[:500],
                   "Fix the TOML syntax, then try again.") from None


def load_toml(path: Path) -> dict[str, Any]:
    """Parse ``path`` (see :func:`read_config`)."""
    return read_config(path)[1]


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    return value


def value_at(data: Any, path: str) -> Any:
    """``data[a][b][c]`` for ``"a.b.c"``; None when absent. The string "None" is null (prime-rl)."""
    node = data
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return None if node == "None" else node


def as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def toml_text(value: Any) -> str:
    """``value`` (plain or a tomlkit item) as TOML text."""
    value = value.unwrap() if hasattr(value, "unwrap") else value
    return tomlkit.item(value).as_string() if value is not None else "null"


# --------------------------------------------------------------------------------------
# The other reading: `prime train` parses TOML with the toml package (0.10.x), not tomllib
# --------------------------------------------------------------------------------------

_OTHER_READER = "the toml package 0.10 that `prime train` reads TOML with"
_AFTER = ("These tools send the tomllib reading; `prime train run` on the same file would not. Write the key so "
          "both agree (no dotted key before a multi-line string; one value type per array).")


@functools.lru_cache(maxsize=64)
def toml_disagreement(text: str) -> tuple[tuple[str, str], ...]:
    """Where ``prime train`` (prime 0.18.0 ``_load_toml``: ``toml.load``) reads ``text``
    differently from tomllib: ``((dotted key path, message), ...)``, at most five, ``()`` when
    both agree (remembered per text: a file checked again costs nothing). Known cases: a dotted
    key whose value is a multi-line string lands in the wrong table; an array mixing value types
    is refused (the file does not load) or cut short (an inline table followed by a number).
    Messages name keys, never values. ``text`` must be TOML that tomllib reads."""
    import toml  # deferred: only this check needs it (pure Python, ~10 ms to import)

    data = _jsonable(tomllib.loads(text))
    try:
        other = _jsonable(toml.loads(text))
    except toml.TomlDecodeError as exc:
        mixed = _mixed_arrays(data)
        where = f" (mixed value types in {', '.join(mixed[:5])})" if mixed else ""
        return ((mixed[0] if mixed else "", f"{_OTHER_READER} refuses this file: {exc.msg}{where}, so "
                 f"`prime train` exits with 'Invalid TOML'. {_AFTER}"),)
    except Exception as exc:  # noqa: BLE001 - the toml package has raised other errors on odd input
        return (("", f"{_OTHER_READER} fails on this file ({type(exc).__name__}). {_AFTER}"),)
    out: list[tuple[str, str]] = []
    only_there = [p for p, how in _differences(other, data, "") if how == "missing"]
    for path, how in _differences(data, other, ""):
        what = {"missing": "does not have this key" + (f" (it reads {', '.join(only_there[:3])} instead)"
                                                       if only_there else ""),
                "value": "reads another value here"}[how]
        out.append((path, f"{_OTHER_READER} {what}. {_AFTER}"))
    return tuple(out[:5])


def _differences(a: Any, b: Any, path: str) -> list[tuple[str, str]]:
    """Key paths where ``a`` has something ``b`` lacks (``missing``) or holds another value."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        out: list[tuple[str, str]] = []
        for key, value in a.items():
            where = f"{path}.{key}" if path else str(key)
            out += _differences(value, b[key], where) if key in b else [(where, "missing")]
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _differences(x, y, f"{path}[{i}]")]
    same = a == b or (isinstance(a, float) and isinstance(b, float) and a != a and b != b)  # nan
    return [] if same and type(a) is type(b) else [(path, "value")]


def _mixed_arrays(data: Any, path: str = "") -> list[str]:
    """Key paths of arrays whose items are not all of one TOML type (the toml package 0.10
    refuses those; integers and floats count as different types, as there)."""
    out: list[str] = []
    if isinstance(data, Mapping):
        for key, value in data.items():
            out += _mixed_arrays(value, f"{path}.{key}" if path else str(key))
    elif isinstance(data, list):
        if len({type(v) for v in data}) > 1:
            out.append(path)
        for i, value in enumerate(data):
            out += _mixed_arrays(value, f"{path}[{i}]")
    return out
