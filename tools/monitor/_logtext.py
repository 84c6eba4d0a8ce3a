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

:func:`digest` groups ERROR/CRITICAL/WARNING messages after masking numbers and ids
(:func:`normalise`), so 500 "restart 7", "restart 8"... lines become one group with a count.
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


@dataclass
class Group:
    """Lines of one level whose normalised messages are equal."""

    level: str
    pattern: str
    example: str
    count: int = 0
    first_seen: str | None = None
    last_seen: str | None = None


@dataclass
class Digest:
    """Counts by level, notable message groups (most severe, then most frequent first), the
    last traceback, and the time span of one component's lines."""

    counts: dict[str, int]
    groups: list[Group]
    last_traceback: str | None
    first_timestamp: str | None
    last_timestamp: str | None


def digest(lines: list[Line]) -> Digest:
    """Summarise parsed lines (oldest first). Plain lines without a level count as ``OTHER``."""
    counts: dict[str, int] = {}
    groups: dict[tuple[str, str], Group] = {}
    last_traceback = None
    stamps = [ln.timestamp for ln in lines if ln.timestamp]
    for ln in lines:
        level = ln.level or "OTHER"
        counts[level] = counts.get(level, 0) + 1
        if ln.exception:
            last_traceback = ln.exception
        if level not in NOTABLE_LEVELS:
            continue
        key = (level, normalise(ln.message))
        group = groups.get(key)
        if group is None:
            group = groups[key] = Group(level=level, pattern=key[1], example=ln.message, first_seen=ln.timestamp)
        group.count += 1
        group.last_seen = ln.timestamp or group.last_seen
    ordered = sorted(groups.values(), key=lambda g: (NOTABLE_LEVELS.index(g.level), -g.count, g.pattern))
    return Digest(counts=counts, groups=ordered, last_traceback=last_traceback,
                  first_timestamp=stamps[0] if stamps else None, last_timestamp=stamps[-1] if stamps else None)
