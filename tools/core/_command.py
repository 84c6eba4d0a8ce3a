"""How a person's shell runs this installation of ``model-factory``: the words every printed
command starts with.

A command printed for a person (an approval, a fix, a next step) is pasted into *their* shell,
which is not the agent's: ``uv run`` or an activated virtual environment put the project's
``.venv/bin`` on the agent's PATH (and the MCP server's), not on the person's. So:

- the bare ``model-factory`` only when the PATH, without any virtual environment's ``bin``
  folder (a folder whose parent holds ``pyvenv.cfg``) and without relative entries, finds this
  very installation's console script (``shutil.which``, symlinks resolved): a ``uv tool
  install``, ``pipx`` or system install;
- otherwise the absolute path of this installation's console script (``sys.argv[0]`` when it is
  the script, else the ``model-factory`` next to the interpreter / in its scripts folder);
- without a console script (``python -m skill`` from a source tree), ``<python> -m skill``.

The process's own PATH stands for the person's (an MCP host may start the server with a
smaller one: then the absolute path is printed, which works anywhere).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import sysconfig
from collections.abc import Mapping
from pathlib import Path

PROGRAM = "model-factory"


def console_script() -> Path | None:
    """This installation's ``model-factory`` console script (absolute, not resolved), or None."""
    candidates: list[Path] = []
    if sys.argv and Path(sys.argv[0]).name == PROGRAM:
        candidates.append(Path(sys.argv[0]).absolute())
    for scheme in (None, f"{os.name}_user"):
        try:
            folder = sysconfig.get_path("scripts", scheme) if scheme else sysconfig.get_path("scripts")
        except KeyError:
            continue
        candidates.append(Path(folder) / PROGRAM)
    candidates.append(Path(sys.executable).absolute().parent / PROGRAM)
    return next((c for c in candidates if c.is_file() and os.access(c, os.X_OK)), None)


def _a_persons_folder(entry: str) -> bool:
    """A PATH entry a person's own shell would have: absolute, not a virtual environment's bin. An
    entry that cannot be looked into (unreadable, a name too long) is not one: skipped, never an error."""
    if not entry or not os.path.isabs(entry):
        return False
    try:
        return not (Path(entry).parent / "pyvenv.cfg").is_file()
    except OSError:
        return False


def program(env: Mapping[str, str] | None = None) -> str:
    """The shell words that run this installation (shell-quoted): ``model-factory``, an absolute
    script path, or ``<python> -m skill``. ``env`` supplies PATH (default: ``os.environ``)."""
    script = console_script()
    if script is None:
        return f"{shlex.quote(sys.executable)} -m skill"
    path = (os.environ if env is None else env).get("PATH", "")
    persons = os.pathsep.join(e for e in path.split(os.pathsep) if _a_persons_folder(e))
    found = shutil.which(PROGRAM, path=persons) if persons else None
    if found and os.path.realpath(found) == os.path.realpath(script):
        return PROGRAM
    return shlex.quote(str(script))


def quote(word: str) -> str:
    """``word`` as one shell word a person can paste: :func:`shlex.quote`, or, when it holds a
    character that is not printable (an escape, a newline, a bidi override), bash/zsh ANSI-C
    quoting (``$'evil\\x1b[31m.toml'``), so the printed command moves no cursor and still names
    the same file."""
    if all(ch == " " or ch.isprintable() for ch in word):
        return shlex.quote(word)
    escaped = []
    for ch in word:
        if ch in "\\'":
            escaped.append("\\" + ch)
        elif ch == " " or ch.isprintable():
            escaped.append(ch)
        else:
            code = ord(ch)
            escaped.append(f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}" if code <= 0xFFFF
                           else f"\\U{code:08x}")
    return "$'" + "".join(escaped) + "'"


def shell_command(words: list[str], env: Mapping[str, str] | None = None,
                  assignments: Mapping[str, str] | None = None) -> str:
    """``[VAR=value ...] <program> word ...``, every word shell-quoted (:func:`quote`): a command a
    person pastes."""
    prefix = [f"{name}={quote(value)}" for name, value in (assignments or {}).items()]
    return " ".join([*prefix, program(env), *(quote(w) for w in words)])
