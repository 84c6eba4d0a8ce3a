"""Reading a prime-rl TOML: its bytes and their parse, and the small accessors every rule uses.

TOML dates and times become ISO strings so a config can travel as JSON. Errors (ToolFailure):
``config_not_found``, ``invalid_toml`` (with line and column).
"""

from __future__ import annotations

import datetime as dt
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomlkit

from tools.errors import FieldProblem, fail

_TOML_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")


def read_config(path: Path) -> tuple[bytes, dict[str, Any]]:
    """The bytes of ``path`` and their parse (tomllib; TOML dates/times as ISO strings so the
    config can travel as JSON). Raises ToolFailure ``config_not_found`` / ``invalid_toml``."""
    try:
        raw = path.read_bytes()
    except IsADirectoryError:
        raise fail("config_not_found", f"{path} is a folder, not a config file.",
                   "Pass the path of a .toml file, or call mf_list_examples and mf_prepare_config to create "
                   "one.") from None
    except (FileNotFoundError, NotADirectoryError):
        raise fail("config_not_found", f"Config file not found: {path}",
                   "Check the path, or call mf_list_examples and mf_prepare_config to create one.") from None
    except OSError as exc:
        raise fail("config_not_found", f"Config file {path} cannot be read: {exc.strerror}",
                   "Check the file's permissions, then call again.") from None
    try:
        return raw, _jsonable(tomllib.loads(raw.decode("utf-8-sig")))  # a leading BOM is not an error
    except UnicodeDecodeError:
        raise fail("invalid_toml", f"Invalid TOML in {path}: not UTF-8 text.", "Save the file as UTF-8.") from None
    except tomllib.TOMLDecodeError as exc:
        where = _TOML_POSITION.search(str(exc))
        location = f"{path}:{where[1]}:{where[2]}" if where else str(path)
        raise fail("invalid_toml", f"Invalid TOML in {path}: {exc}",
                   "Fix the TOML syntax at the line and column given, then validate again.",
                   fields=[FieldProblem(path=location, problem=str(exc))]) from None


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
