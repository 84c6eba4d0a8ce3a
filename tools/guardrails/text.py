"""Text a person reads to decide: nothing in it may move the cursor, recolour or rewrite a line.

A plan summary and the approval screen show text that came from an agent (``--name``), a file
(the TOML's ``name``, the config path, the state store) or the platform (a run's name or status). A
terminal obeys the control characters in such text: ESC starts a sequence that moves the
cursor, clears the screen or hides what follows; CR returns to the line start and LF starts a
new line, so the text after it reads as a line of the summary; Unicode bidi overrides (U+202E)
reorder what is shown; zero-width characters and U+2028/U+2029 hide or split text. An agent could
write a fake ``Owner (pays):`` or ``Cost estimate:`` line over the real one.

Two defences, both here:

* :func:`display_problem` - the refusal on the way in (a run name from an argument or the TOML):
  why a value cannot be shown, naming each character by code point, never echoing it.
* :func:`shown` - the one escape for text shown on those screens: every character that is not
  printable (``str.isprintable``: categories Cc, Cf, Cs, Co, Cn, Zl, Zp, and Zs other than the
  space) is written as a Python escape (``\\x1b``, ``\\n``, ``\\u202e``), the way error messages
  show a value with ``!r``. Printable text, accents and CJK included, is unchanged.
"""

from __future__ import annotations

#: Escapes Python's repr uses for the common control characters.
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(ch: str) -> str:
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _safe(ch: str) -> bool:
    return ch == " " or ch.isprintable()


def shown(text: object) -> str:
    """``str(text)`` with every non-printable character escaped (module docstring); a backslash
    stays one backslash. One line in, one line out: no character of the result moves the cursor."""
    value = str(text)
    if all(_safe(ch) for ch in value):
        return value
    return "".join(ch if _safe(ch) else _escape(ch) for ch in value)


def display_problem(text: str) -> str | None:
    """Why ``text`` cannot be shown to a person as it is (its non-printable characters, by code
    point and position, e.g. ``U+001B (escape) at position 2``), or None. Never echoes the text."""
    bad = [(i, ch) for i, ch in enumerate(text) if not _safe(ch)]
    if not bad:
        return None
    words = [f"U+{ord(ch):04X}{_kind(ch)} at position {i + 1}" for i, ch in bad[:3]]
    more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
    return (f"holds {'a control character' if len(bad) == 1 else 'control characters'} ({', '.join(words)}{more}), "
            "which would change what a person reads on the plan and the approval screen")


def _kind(ch: str) -> str:
    names = {"\x1b": "escape", "\r": "carriage return", "\n": "line feed", "\t": "tab", "\u2028": "line separator",
             "\u2029": "paragraph separator", "\u200b": "zero-width space", "\u202e": "right-to-left override"}
    return f" ({names[ch]})" if ch in names else ""
