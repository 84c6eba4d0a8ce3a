"""The terminal a person reads: its width, whether it is one at all, colour, and the layout of
text, facts and tables for it (no rich: plain strings, so what is measured is what is printed).

Rules (STYLE.md §6):

- Lines break at spaces only. A word never breaks, and a span in backticks (a command) is one
  word: an id, a path or a command is never split. A word wider than the line stands alone on
  its line, indented only as far as it still fits, at the left edge when it is wider than the
  line (:func:`fit_alone`: the terminal shows it wrapped; copying it gives it whole).
- In prose for a person (hints, errors, notes: ``wrap(..., commands=True)``), a command (a
  backtick span holding a space) goes on a line of its own, with no indent and no backticks, so
  a person copies the whole line and pastes it whole (backticks pasted into a shell would run a
  command substitution). Piped, commands stay inline in backticks, one paragraph per line.
  Left out around a bare command: its backticks, a "(" just before it with the ")" that closes
  that one, and the punctuation ending its sentence; every other character is kept (a ")" that
  closes a parenthesis opened earlier in the text starts the next line).
- Preformatted lines (a plan summary: ``  Label:  value``, ``- item``) keep their indent; what
  follows a label wraps under the value, an item's continuation under its text (:func:`block`).
- A table fits the width: prose columns (values with spaces) fold at spaces; when they cannot,
  the last columns are dropped (a note names them and ``--json``); when even the first ones do
  not fit, each row becomes a block of ``name  value`` lines (vertical layout). Columns are
  separated by two spaces; no line ends in spaces.
- Piped (not a terminal): nothing is wrapped or padded. Tables are tab-separated rows under a
  header row of field names, facts are ``name<TAB>value`` rows; tabs and newlines inside a value
  become spaces. That is data (``cut -f1``); the JSON contract is ``--json``.
- Colour only on a terminal, never with ``NO_COLOR`` set (https://no-color.org) or ``TERM=dumb``.
"""

from __future__ import annotations

import os
import re
import select
import shutil
import signal
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TextIO

#: Columns assumed when the width cannot be read.
DEFAULT_COLUMNS = 80
_GAP = "  "
#: A word: non-space characters, where a backtick span (spaces inside) counts as one piece.
_WORD = re.compile(r"(?:[^\s`]*`[^`]*`)+[^\s`]*|\S+")


@dataclass(frozen=True)
class Terminal:
    """Where output goes: ``width`` in columns (None when piped: no wrapping), ``colour``."""

    stream: TextIO
    width: int | None
    colour: bool

    @classmethod
    def of(cls, stream: TextIO) -> Terminal:
        """The terminal behind ``stream`` (its width from ``COLUMNS`` or the device)."""
        tty = _isatty(stream)
        width = None
        if tty:
            width = os.environ.get("COLUMNS", "").isdigit() and int(os.environ["COLUMNS"]) or None
            if not width:
                try:
                    width = os.get_terminal_size(stream.fileno()).columns or DEFAULT_COLUMNS  # 0: never sized
                except (OSError, ValueError, AttributeError):
                    width = shutil.get_terminal_size((DEFAULT_COLUMNS, 24)).columns
            width = max(width, 20)
        colour = tty and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
        return cls(stream, width, colour)

    @property
    def piped(self) -> bool:
        return self.width is None

    def print(self, line: str = "") -> None:
        print(line, file=self.stream, flush=True)

    def style(self, text: str, *codes: str) -> str:
        """``text`` in bold (``"1"``), red (``"31"``)... when colour is on; else as is."""
        return f"\x1b[{';'.join(codes)}m{text}\x1b[0m" if self.colour and codes else text


def unicode_ok(stream: TextIO, env: Mapping[str, str] | None = None) -> bool:
    """Whether ``stream`` may get characters beyond ASCII (a progress bar's ``━``): its encoding is
    UTF-8 and so is the person's locale, read as the C library does (``LC_ALL``, then ``LC_CTYPE``, then
    ``LANG``; unset: the C locale). ``LC_CTYPE=C.UTF-8`` is skipped: Python sets it itself when it
    coerces a C locale (PEP 538), so it says nothing about the terminal. ``LANG=C``: ASCII."""
    environ: Mapping[str, str] = os.environ if env is None else env
    if "utf" not in (getattr(stream, "encoding", "") or "").lower():
        return False
    ctype = environ.get("LC_CTYPE", "")
    locale = environ.get("LC_ALL") or (ctype if ctype != "C.UTF-8" else "") or environ.get("LANG") or "C"
    return bool(re.search(r"utf-?8", locale, re.I))


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def stdout() -> Terminal:
    return Terminal.of(sys.stdout)


def stderr() -> Terminal:
    return Terminal.of(sys.stderr)


# -- text -----------------------------------------------------------------------------------


def words(text: str) -> list[str]:
    """The unbreakable words of ``text`` (a backtick span with what is glued to it is one)."""
    return _WORD.findall(text)


def wrap(text: str, width: int | None, indent: str = "", first_indent: str | None = None, *,
         commands: bool = False) -> list[str]:
    """``text`` as lines of at most ``width`` columns (breaking at spaces only; a word wider than
    the line stands alone). ``width`` None: one line. Newlines in ``text`` start new paragraphs.
    ``commands`` (and a width): each command in backticks on a line of its own, bare (see above)."""
    first = indent if first_indent is None else first_indent
    out: list[str] = []
    for paragraph in text.split("\n"):
        line, lead, after_command, end = "", first if not out else indent, False, 0
        opened = 0  # "(" left out just before a bare command: the ")" that closes it is left out too
        for match in _WORD.finditer(paragraph):
            # words on one line keep the spaces between them (a path with two spaces stays that path)
            word, gap, end = match[0], paragraph[end:match.start()] or " ", match.end()
            alone = _COMMAND.fullmatch(word) if commands and width is not None else None
            if alone:
                before, command, after = alone["before"], alone["command"], alone["after"]
                if before.endswith("("):
                    before, opened = before[:-1], opened + 1
                if after.startswith(")") and opened:
                    after, opened = after[1:], opened - 1
                line = f"{line} {before}" if line and before else line or before
                if after.startswith(")") and (i := _open_paren(line)) is not None:
                    # "(run `cmd`)": the "(" earlier on the line goes with the ")", not left open
                    line, after = (line[:i] + line[i + 1:]).rstrip(), after[1:]
                if line:
                    out.append((lead + line).rstrip())
                out.append(command)
                if not after.startswith(")"):  # the punctuation ending the command's sentence
                    after = after.lstrip(".,;:")
                line, lead, after_command = after, indent, True
                continue
            if line and width is not None and len(lead) + len(line) + len(gap) + len(word) > width:
                out.append(lead + line)
                line, lead = word, indent
            else:
                line = f"{line}{gap}{word}" if line else word
            after_command = False
        if line or not after_command:
            out.append((lead + line).rstrip())
    return out if width is None else [fit_alone(line, width) for line in out]


def _open_paren(text: str) -> int | None:
    """The index of the last "(" of ``text`` that no ")" closes, or None."""
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        if text[i] == ")":
            depth += 1
        elif text[i] == "(":
            if depth == 0:
                return i
            depth -= 1
    return None


def fit_alone(line: str, width: int | None) -> str:
    """``line`` as it is, unless it is one word (an id, a code, a URL) whose indent makes it wider than
    ``width``: then indented only as far as it still fits, at the left edge when it is wider than the
    line, so the terminal shows it as one line it wraps itself (copying it gives it whole)."""
    piece = line.lstrip(" ")
    if width is not None and len(line) > width and piece != line and len(words(piece)) == 1:
        return " " * max(0, min(len(line) - len(piece), width - len(piece))) + piece
    return line


#: A word holding one command: a backtick span with a space in it, and what is glued to it.
_COMMAND = re.compile(r"(?P<before>[^`\s]*)`(?P<command>[^`]* [^`]*)`(?P<after>[^`\s]*)")
#: A preformatted line's label (``Owner (pays):  ``: text, a colon, two spaces or more) or bullet.
_LABEL = re.compile(r"(?P<label>[^\s].*?:  +|[-*] )(?=\S)")


def block(lines: list[str], width: int | None) -> list[str]:
    """Preformatted ``lines`` (a plan summary, a report) wrapped to ``width``: each keeps its
    indent; after a label (``Config:       ``) or a bullet (``- ``) the text wraps under itself. A
    word too wide for that column starts its own line, indented as far as it can be and still fit.
    ``width`` None: the lines as they are."""
    if width is None:
        return list(lines)
    out: list[str] = []
    for line in lines:
        body = line.lstrip(" ")
        indent = " " * (len(line) - len(body))
        label = _LABEL.match(body)
        head = label["label"] if label else ""
        hanging, rest = " " * (len(indent) + len(head)), body[len(head):]
        first = indent + head
        if head and len(first) + len((words(rest) or [""])[0]) > width:  # the label on a line of its own
            out.append(first.rstrip())
            first = hanging
        out += wrap(rest, width, hanging, first_indent=first)  # a lone wide word: as far right as it fits
    return out


def one_line(value: str) -> str:
    """A value as one TSV cell: tabs and newlines become spaces."""
    return re.sub(r"[\t\r\n]+", " ", value)


# -- facts: name  value ---------------------------------------------------------------------


def facts(pairs: list[tuple[str, str]], term: Terminal, indent: str = "") -> list[str]:
    """``name  value`` lines, values aligned and wrapped under themselves; piped: ``name<TAB>value``."""
    if term.piped:
        return [f"{name}\t{one_line(value)}" for name, value in pairs]
    label = min(max((len(n) for n, _ in pairs), default=0), 24)
    lines: list[str] = []
    for name, value in pairs:
        head = f"{indent}{term.style(name.ljust(label), '1')}{_GAP}"
        hanging = " " * (len(indent) + label + len(_GAP))
        longest = max((len(w) for w in words(value)), default=0)
        if len(name) > label or (term.width and longest > term.width - len(hanging)):
            # a long name, or a word (path, id, command) wider than the room beside the labels: the value
            # goes under the name, indented less, so the word fits the line when it can
            lines.append(indent + term.style(name, "1"))
            lines += wrap(value, term.width, indent + "  ")
            continue

        body = wrap(value, term.width, hanging, first_indent=hanging)
        lines.append(head + body[0].lstrip() if body else head.rstrip())
        lines += body[1:]
    return [line.rstrip() for line in lines]


# -- tables ---------------------------------------------------------------------------------


def table(columns: list[str], rows: list[list[str]], term: Terminal, *, keep: int = 1,
          headers: list[str] | None = None) -> tuple[list[str], list[str]]:
    """Lay out ``rows`` under ``columns`` for ``term``: returns ``(lines, dropped column names)``.

    On a terminal: natural widths when they fit; else prose columns fold; else columns are dropped
    from the right (never the first ``keep``); else one block per row. Piped: a header row of
    ``columns`` and tab-separated rows, nothing dropped."""
    if term.piped:
        return ["\t".join(columns), *("\t".join(one_line(c) for c in row) for row in rows)], []
    shown = headers or [c.replace("_", " ").upper() for c in columns]
    index = list(range(len(columns)))
    while True:
        widths = _fit(index, shown, rows, term.width or DEFAULT_COLUMNS)
        if widths is not None:
            break
        if len(index) <= keep:
            return _vertical(columns, rows, term), []
        index.pop()
    dropped = [columns[i] for i in range(len(columns)) if i not in index]
    lines = [_join([term.style(shown[i].ljust(widths[n]) if n < len(index) - 1 else shown[i], "1")
                    for n, i in enumerate(index)])]
    for row in rows:
        cells = [wrap(row[i], widths[n]) if row[i] else [""] for n, i in enumerate(index)]
        for k in range(max(len(c) for c in cells)):
            lines.append(_join([(c[k] if k < len(c) else "").ljust(widths[n]) for n, c in enumerate(cells)]))
    return [line.rstrip() for line in lines], dropped


def _join(cells: list[str]) -> str:
    return _GAP.join(cells).rstrip()


def _fit(index: list[int], headers: list[str], rows: list[list[str]], width: int) -> list[int] | None:
    """Column widths for the columns in ``index`` within ``width``, or None when they cannot fit
    without breaking a word. A column folds only at spaces, never below its longest word."""
    natural = [max([len(headers[i]), *(len(r[i]) for r in rows)]) for i in index]
    least = [max([len(headers[i]), *(len(w) for r in rows for w in words(r[i]))]) for i in index]
    room = width - len(_GAP) * (len(index) - 1)
    if sum(natural) <= room:
        return natural
    if sum(least) > room:
        return None
    widths = least[:]
    spare = room - sum(least)
    wants = [n - m for n, m in zip(natural, least, strict=True)]
    total = sum(wants)
    for n, want in enumerate(wants):  # share the spare room in proportion to what each wants
        widths[n] += want * spare // total if total else 0
    return widths


def _vertical(columns: list[str], rows: list[list[str]], term: Terminal) -> list[str]:
    lines: list[str] = []
    for row in rows:
        if lines:
            lines.append("")
        lines += facts([(c, v) for c, v in zip(columns, row, strict=True) if v], term)
    return lines


def ask(prompt: str, *, fd: int | None = None, out: TextIO | None = None) -> str | None:
    """``input(prompt)`` that Ctrl-C (or SIGTERM, or any signal whose handler raises) always ends: the line typed
    at the terminal without its line end, or None at the end of input (Ctrl-D).

    ``input()`` can miss a signal: one that lands after the prompt is written and before the read starts only
    sets a flag, and the read then blocks until the person presses Enter. Here the read waits in ``select`` on
    standard input and on a wake-up pipe the interpreter writes to when a signal arrives
    (:func:`signal.set_wakeup_fd`), so the signal's handler runs at once. The terminal's own line editing
    (backspace, Ctrl-U) applies, as with ``input()`` without readline. Outside the main thread (no signal
    handlers there): plain ``input()``. ``fd`` / ``out``: read from that descriptor and write the prompt there
    instead of standard input and output (the controlling terminal, ``/dev/tty``)."""

    if threading.current_thread() is not threading.main_thread() and fd is None:
        try:
            return input(prompt)
        except EOFError:
            return None
    out = out or sys.stdout
    out.write(prompt)
    out.flush()
    if threading.current_thread() is not threading.main_thread():
        return _read_line(fd)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    before = signal.set_wakeup_fd(wake_write)
    fd, line = (sys.stdin.fileno() if fd is None else fd), b""
    try:
        while not line.endswith(b"\n"):
            ready, _, _ = select.select([fd, wake_read], [], [])
            if wake_read in ready:  # a signal: its handler has run (an interrupt raised); any other, read on
                os.read(wake_read, 512)
            if fd in ready:
                chunk = os.read(fd, 4096)
                if not chunk:
                    return None
                line += chunk
    finally:
        signal.set_wakeup_fd(before)
        os.close(wake_read)
        os.close(wake_write)
    return line.decode(sys.stdin.encoding or "utf-8", errors="replace").rstrip("\r\n")


def _read_line(fd: int | None) -> str | None:
    """One line read from ``fd`` (None at the end of input), without signal wake-ups (not the main thread)."""
    line = b""
    while not line.endswith(b"\n"):
        chunk = os.read(sys.stdin.fileno() if fd is None else fd, 4096)
        if not chunk:
            return None
        line += chunk
    return line.decode("utf-8", errors="replace").rstrip("\r\n")
