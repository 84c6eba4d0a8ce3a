"""Run log text -> parsed lines and digests, the way ``prime train logs`` reads them (the
parsing behind the log tools).

Source: reference/prime-api.md §5.5 and ``prime_cli/commands/rl.py`` 0.18.0
(``format_json_log_line``, ``clean_logs``):

- A line is a JSON log entry when, after removing ANSI colours and any number of the
  prefixes ``[adminlog] ``, ``[rank0]: ``-style and ``(Worker pid=123) ``-style, it is a
  JSON object with string ``timestamp`` and ``level`` and a ``message`` (``type:
  "progress"`` entries are hidden). Keys used: ``tag`` (the emitting component),
  ``exception`` (a traceback text); other keys are metadata.
- Any other line is plain text. tqdm-style progress bars are hidden unless they show 100%.
  Beyond the CLI: a plain line's level is read from a level word in it (``ERROR``,
  ``WARNING``...), and a plain ``Traceback (most recent call last):`` block (its indented
  lines and the exception line after them) becomes one ERROR entry.

:class:`Signatures` groups ERROR/CRITICAL/WARNING messages after masking numbers and ids
(:func:`normalise`), so 500 "restart 7", "restart 8"... lines become one signature with a count.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
LOG_PREFIX = re.compile(r"^(?:\[adminlog\]\s+|\[[a-zA-Z_]+\d+\]:\s*|\(\w+ pid=\d+\)\s+)")
PROGRESS_BAR = re.compile(r".*\|[█▏▎▍▌▋▊▉ ]{10,}\|.*")
PERCENT_BAR = re.compile(r"\d+%\|")
LEVEL_WORD = re.compile(r"\b(CRITICAL|FATAL|ERROR|WARNING|WARN|SUCCESS|INFO|DEBUG)\b")
TRACEBACK_START = "Traceback (most recent call last)"
#: Levels a digest lists messages for, most severe first.
NOTABLE_LEVELS = ("CRITICAL", "ERROR", "WARNING")
_ALIASES = {"WARN": "WARNING", "FATAL": "CRITICAL", "ERR": "ERROR"}
_MASKS = (
    (re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"), "<time>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.IGNORECASE), "<uuid>"),
    (re.compile(r"\bc[a-z0-9]{24}\b"), "<id>"),
    (re.compile(r"\b0x[0-9a-f]+\b", re.IGNORECASE), "<hex>"),
    (re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b", re.IGNORECASE), "<hex>"),
    (re.compile(r"\d+(?:\.\d+)?"), "<n>"),
)
MAX_PATTERN_CHARS = 200


@dataclass
class Line:
    """One visible log entry.

    ``timestamp`` is the entry's own text (ISO for JSON entries, ``None`` for plain lines);
    ``level`` is upper-case (``None`` when a plain line names none); ``source`` joins the
    stripped prefixes and the ``tag`` (``"rank0 trainer"``); ``exception`` is a traceback.
    """

    message: str
    timestamp: str | None = None
    level: str | None = None
    source: str | None = None
    exception: str | None = None
    structured: bool = False


@dataclass
class Parsed:
    """:func:`parse_logs` output: visible lines (oldest first) and how many were hidden."""

    lines: list[Line] = field(default_factory=list)
    hidden_progress: int = 0


def _level(value: str | None) -> str | None:
    if not value:
        return None
    upper = value.strip().upper()
    return _ALIASES.get(upper, upper)


def _text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def parse_json_line(raw: str) -> Line | None | bool:
    """A JSON log entry as a :class:`Line`; ``True`` for a hidden progress entry; ``None`` if not one."""
    trimmed = ANSI.sub("", raw).strip()
    prefixes = []
    while match := LOG_PREFIX.match(trimmed):
        prefixes.append(match.group().strip().rstrip(":").strip("[]()"))
        trimmed = trimmed[match.end():]
    if not (trimmed.startswith("{") and trimmed.endswith("}")):
        return None
    try:
        entry = json.loads(trimmed)
    except (ValueError, RecursionError):
        return None
    if not isinstance(entry, dict):
        return None
    timestamp, level = entry.get("timestamp"), entry.get("level")
    if not (isinstance(timestamp, str) and timestamp and isinstance(level, str) and level):
        return None
    if entry.get("type") == "progress":
        return True
    if "message" not in entry:
        return None
    if entry.get("tag") is not None:
        prefixes.append(_text(entry["tag"]))
    exception = entry.get("exception")
    return Line(message=_text(entry["message"]), timestamp=timestamp, level=_level(level),
                source=" ".join(prefixes) or None, exception=_text(exception) if exception else None,
                structured=True)


def is_progress_bar(text: str) -> bool:
    """A tqdm-style bar that is not finished (the CLI hides these; 100% bars stay)."""
    return bool(PROGRESS_BAR.search(text) or PERCENT_BAR.search(text)) and "100%" not in text


def parse_logs(text: str) -> Parsed:
    """Parse the ``logs`` text of GET ``/rft/runs/{id}/logs`` into visible lines (oldest first)."""
    raw_lines = text.splitlines()
    out = Parsed()
    i = 0
    while i < len(raw_lines):
        raw = raw_lines[i]
        i += 1
        if not raw.strip():
            continue
        parsed = parse_json_line(raw)
        if parsed is True:
            out.hidden_progress += 1
            continue
        if isinstance(parsed, Line):
            out.lines.append(parsed)
            continue
        plain = ANSI.sub("", raw).rstrip()
        if is_progress_bar(plain):
            out.hidden_progress += 1
            continue
        if plain.lstrip().startswith(TRACEBACK_START):
            block = [plain]
            while i < len(raw_lines) and raw_lines[i][:1] in (" ", "\t") and parse_json_line(raw_lines[i]) is None:
                block.append(ANSI.sub("", raw_lines[i]).rstrip())
                i += 1
            if i < len(raw_lines) and raw_lines[i].strip() and parse_json_line(raw_lines[i]) is None:
                block.append(ANSI.sub("", raw_lines[i]).rstrip())
                i += 1
            out.lines.append(Line(message=block[-1].strip(), level="ERROR", exception="\n".join(block)))
            continue
        word = LEVEL_WORD.search(plain)
        out.lines.append(Line(message=plain, level=_level(word.group(1)) if word else None))
    return out


def normalise(message: str) -> str:
    """``message`` with times, uuids, CUIDs, hex ids and numbers masked, whitespace collapsed."""
    text = " ".join(message.split())
    for pattern, mask in _MASKS:
        text = pattern.sub(mask, text)
    return text[:MAX_PATTERN_CHARS]


def excerpt(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, keeping its start and (for tracebacks) its end."""
    if len(text) <= limit:
        return text
    head = limit // 3
    return text[:head] + "\n...\n" + text[-(limit - head - 5):]


def head(text: str, limit: int) -> str:
    """``text`` cut to its first ``limit`` characters (an ellipsis marks the cut)."""
    return text if len(text) <= limit else text[:max(0, limit - 1)].rstrip() + "\u2026"


def traceback_end(text: str, limit: int) -> str:
    """A traceback cut to ``limit`` characters keeping what matters: its first line and as many of its last
    lines (the innermost frames and the exception) as fit."""
    if len(text) <= limit:
        return text
    lines = text.splitlines()
    kept: list[str] = []
    room = limit - len(lines[0]) - 5
    for line in reversed(lines[1:]):
        if len(line) + 1 > room:
            break
        kept.insert(0, line)
        room -= len(line) + 1
    return "\n".join([lines[0], "...", *kept]) if kept else head(lines[-1], limit)


@dataclass
class Signature:
    """Lines of one stream and level whose messages are equal once numbers and ids are masked
    (:func:`normalise`): how many, when first and last, one real message and one traceback."""

    component: str
    level: str
    pattern: str
    example: str
    count: int = 0
    first_seen: str | None = None
    last_seen: str | None = None
    traceback: str | None = None


class Signatures:
    """The distinct ERROR/CRITICAL/WARNING messages of lines added in time order, per stream; memory
    bounded by the number of distinct messages, not of lines."""

    def __init__(self) -> None:
        self._by: dict[tuple[str, str, str], Signature] = {}

    def add(self, component: str, line: Line) -> None:
        """Count ``line`` (read from ``component``) if its level is notable."""
        level = line.level or "OTHER"
        if level not in NOTABLE_LEVELS:
            return
        pattern = normalise(line.message)
        sig = self._by.get((component, level, pattern))
        if sig is None:
            sig = self._by[(component, level, pattern)] = Signature(component, level, pattern, line.message,
                                                                     first_seen=line.timestamp)
        sig.count += 1
        sig.last_seen = line.timestamp or sig.last_seen
        if sig.traceback is None and line.exception:
            sig.traceback = line.exception

    def found(self, levels: tuple[str, ...] = NOTABLE_LEVELS) -> list[Signature]:
        """The signatures of ``levels``, oldest first seen first (unknown times last)."""
        picked = [s for s in self._by.values() if s.level in levels]
        return sorted(picked, key=lambda s: (s.first_seen is None, s.first_seen or "", s.component, s.pattern))
