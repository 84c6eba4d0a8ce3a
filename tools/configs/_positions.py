"""Where a key path is in a TOML file: line and column (1-based), for findings people can act on.

:func:`key_positions` scans the text once (a small structural scanner, not a second TOML parser:
the file already parsed with tomllib) and records the position of every table header, every
``key = value`` (each prefix of a dotted key too), every key of an inline table and every item of
an array, under its key path (``("orchestrator", "train", "source", 0, "name")``); arrays of
tables count their ``[[...]]`` headers. :func:`position_of` answers for a finding's key path with
the longest prefix that is written in the file (a missing key points at its table). Bounded:
linear in the file; on text it does not understand it stops and keeps what it found.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Sequence

Loc = tuple[str | int, ...]
_BARE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "\\": "\\"}


class _Stop(Exception):
    """The scanner met something it does not understand."""


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]
        self.found: dict[Loc, tuple[int, int]] = {}
        self.arrays: dict[Loc, int] = {}  # array-of-tables path -> index of its last [[header]]

    # -- primitives ---------------------------------------------------------------------
    def peek(self, n: int = 1) -> str:
        return self.text[self.pos:self.pos + n]

    def where(self, pos: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.starts, pos)
        return line, pos - self.starts[line - 1] + 1

    def record(self, loc: Loc, pos: int) -> None:
        self.found.setdefault(loc, self.where(pos))

    def spaces(self) -> None:
        while self.peek() in (" ", "\t") and self.pos < len(self.text):
            self.pos += 1

    def blank(self) -> None:
        """Spaces, newlines and comments."""
        while self.pos < len(self.text):
            c = self.peek()
            if c in " \t\r\n":
                self.pos += 1
            elif c == "#":
                end = self.text.find("\n", self.pos)
                self.pos = len(self.text) if end == -1 else end
            else:
                return

    def expect(self, c: str) -> None:
        if self.peek() != c:
            raise _Stop
        self.pos += 1

    # -- keys -----------------------------------------------------------------------------
    def key(self) -> list[tuple[str, int]]:
        """A (dotted) key: [(part, position)]."""
        parts = []
        while True:
            self.spaces()
            start = self.pos
            c = self.peek()
            if c == '"':
                parts.append((self.basic_string(), start))
            elif c == "'":
                parts.append((self.literal_string(), start))
            else:
                while self.pos < len(self.text) and self.text[self.pos] in _BARE:
                    self.pos += 1
                if self.pos == start:
                    raise _Stop
                parts.append((self.text[start:self.pos], start))
            self.spaces()
            if self.peek() != ".":
                return parts
            self.pos += 1

    def basic_string(self) -> str:
        if self.peek(3) == '"""':
            end = self.text.find('"""', self.pos + 3)
            while end != -1 and self.text[end + 3:end + 4] == '"':
                end += 1
            if end == -1:
                raise _Stop
            self.pos = end + 3
            return ""
        self.pos += 1
        out: list[str] = []
        while self.pos < len(self.text):
            c = self.text[self.pos]
            if c == '"':
                self.pos += 1
                return "".join(out)
            if c == "\\":
                nxt = self.text[self.pos + 1:self.pos + 2]
                if nxt in _ESCAPES:
                    out.append(_ESCAPES[nxt])
                    self.pos += 2
                    continue
                if nxt in ("u", "U"):
                    width = 4 if nxt == "u" else 8
                    out.append(chr(int(self.text[self.pos + 2:self.pos + 2 + width], 16)))
                    self.pos += 2 + width
                    continue
                raise _Stop
            if c == "\n":
                raise _Stop
            out.append(c)
            self.pos += 1
        raise _Stop

    def literal_string(self) -> str:
        if self.peek(3) == "'''":
            end = self.text.find("'''", self.pos + 3)
            while end != -1 and self.text[end + 3:end + 4] == "'":
                end += 1
            if end == -1:
                raise _Stop
            self.pos = end + 3
            return ""
        end = self.text.find("'", self.pos + 1)
        if end == -1:
            raise _Stop
        value = self.text[self.pos + 1:end]
        self.pos = end + 1
        return value

    # -- structure ------------------------------------------------------------------------
    def document(self) -> None:
        current: Loc = ()
        while True:
            self.blank()
            if self.pos >= len(self.text):
                return
            start = self.pos
            if self.peek(2) == "[[":
                self.pos += 2
                path = self.resolve(self.key(), whole=False)
                self.expect("]")
                self.expect("]")
                index = self.arrays.get(path, -1) + 1
                self.arrays[path] = index
                self.record(path, start)
                current = (*path, index)
                self.record(current, start)
            elif self.peek() == "[":
                self.pos += 1
                current = self.resolve(self.key(), whole=True)
                self.expect("]")
                self.record(current, start)
            else:
                self.keyval(current)

    def resolve(self, parts: list[tuple[str, int]], whole: bool) -> Loc:
        """A header's key path, with the index of the current item of each array of tables on
        the way (``[a.b]`` after ``[[a]]`` is in the last ``a``); ``whole``: the last part too."""
        path: Loc = ()
        for i, (name, _) in enumerate(parts):
            path = (*path, name)
            last = i == len(parts) - 1
            if path in self.arrays and (whole or not last):
                path = (*path, self.arrays[path])
        return path

    def keyval(self, base: Loc) -> None:
        parts = self.key()
        path = base
        for name, pos in parts:
            path = (*path, name)
            self.record(path, pos)
        self.spaces()
        self.expect("=")
        self.spaces()
        self.value(path)

    def value(self, path: Loc) -> None:
        c = self.peek()
        if c == '"':
            self.basic_string()
        elif c == "'":
            self.literal_string()
        elif c == "[":
            self.pos += 1
            index = 0
            while True:
                self.blank()
                if self.peek() == "]":
                    self.pos += 1
                    return
                self.record((*path, index), self.pos)
                self.value((*path, index))
                self.blank()
                if self.peek() == ",":
                    self.pos += 1
                    index += 1
                elif self.peek() == "]":
                    self.pos += 1
                    return
                else:
                    raise _Stop
        elif c == "{":
            self.pos += 1
            while True:
                self.spaces()
                if self.peek() == "}":
                    self.pos += 1
                    return
                self.keyval(path)
                self.spaces()
                if self.peek() == ",":
                    self.pos += 1
                elif self.peek() == "}":
                    self.pos += 1
                    return
                else:
                    raise _Stop
        else:
            start = self.pos
            while self.pos < len(self.text) and self.text[self.pos] not in ",]}\n#":
                self.pos += 1
            if self.pos == start:
                raise _Stop


@functools.lru_cache(maxsize=32)
def key_positions(text: str) -> dict[Loc, tuple[int, int]]:
    """Every key path written in ``text`` (a TOML document tomllib accepts) -> (line, column),
    1-based, of its first appearance (remembered per text; do not change the answer)."""
    scanner = _Scanner(text)
    try:
        scanner.document()
    except (_Stop, ValueError, IndexError):
        pass
    return scanner.found


def position_of(loc: Sequence[str | int], positions: dict[Loc, tuple[int, int]]) -> tuple[int, int] | None:
    """The position of ``loc``, or of its longest prefix that is in the file: written itself, or
    implied by the first key written under it (``[trainer.optim]`` implies ``trainer``); None for
    the whole file (``()``) or when nothing of it is in the file."""
    path = tuple(loc)
    while path:
        hit = positions.get(path)
        if hit is not None:
            return hit
        under = [where for key, where in positions.items() if key[:len(path)] == path]
        if under:
            return min(under)
        path = path[:-1]
    return None
