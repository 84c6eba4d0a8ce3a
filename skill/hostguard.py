"""The guard hook an agent host runs before each of its agent's shell commands and file writes.

Installed by ``model-factory install-skill --hook`` (:mod:`skill.install`) for Claude Code (a
``PreToolUse`` hook in ``~/.claude/settings.json``, https://code.claude.com/docs/en/hooks) and Codex
(a ``PreToolUse`` hook in ``~/.codex/hooks.json``, https://developers.openai.com/codex/hooks). The host
runs ``python -I hostguard.py --state DIR``, passes the tool call as JSON on stdin (``tool_name``,
``tool_input.command`` or ``tool_input.file_path``), and blocks the call when this exits 2, showing
the agent what it wrote on stderr. It stops the agent's own shell from:

* ``model-factory approve`` (a person approves, in a terminal of their own);
* ``prime train run|stop|delete|restart ... --yes`` (the prime CLI acting without its own prompt:
  the agent uses the model-factory tools, which ask a person);
* naming the state folder in any other command, or writing a file in it with the host's file tools
  (``model-factory`` commands, which write there legitimately, pass).

Everything else passes (exit 0, nothing printed). It reads the command as words, with quoted
commands (``bash -c "..."``, ``script -c "..."``) read too; it cannot see through a command built at
run time (a variable, base64, a script written first): a guard for an honest or mistaken agent, not
a sandbox. Standard library only, nothing of this package imported: it starts in a few milliseconds.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Iterable, Sequence

#: The words after ``prime train`` that act on runs, refused with ``--yes``/``-y``.
PRIME_ACTIONS = ("run", "stop", "delete", "restart")
#: Path fragments that name a per-user state folder wherever its home is.
STATE_FRAGMENTS = ("/.local/state/model-factory", "model-factory/state.db")
_SEPARATORS = {";", "&&", "||", "|", "&", "(", ")", "\n", "|&", ";;"}
_MAX_DEPTH = 3


def _words(command: str) -> list[list[str]]:
    """``command`` as its simple commands' words (shell quoting applied; operators split them)."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        tokens = list(lexer)
    except ValueError:  # an unclosed quote: read it as plain words
        tokens = command.replace('"', " ").replace("'", " ").split()
    commands: list[list[str]] = []
    current: list[str] = []
    for token in tokens:
        if token in _SEPARATORS:
            if current:
                commands.append(current)
            current = []
        else:
            current.append(token)
    if current:
        commands.append(current)
    return commands


def _base(word: str) -> str:
    return word.rsplit("/", 1)[-1]


#: Words that may come before the program a command runs (wrappers, their subcommands and options).
_WRAPPERS = {"env", "sudo", "nohup", "time", "nice", "exec", "command", "uv", "uvx", "pipx", "poetry", "pdm", "hatch",
             "run", "timeout", "--"}


def _is_model_factory(words: Sequence[str]) -> int | None:
    """The index of the word after the program when ``words`` run model-factory (``model-factory``
    wherever it is installed, or ``python -m skill``), possibly through a wrapper (``uv run``, ``env``,
    assignments), else None."""
    for i, word in enumerate(words):
        if _base(word) == "model-factory" and "$" not in word and not word.startswith("~"):
            return i + 1
        if word == "-m" and i + 1 < len(words) and words[i + 1] == "skill" and i and \
                _base(words[i - 1]).startswith("python"):
            return i + 2
        if not (word in _WRAPPERS or word.startswith("-") or "=" in word or word.isdigit()
                or _base(word).startswith("python")):
            return None  # the program is another one
    return None


def _expand(word: str, home: str, state_home: str) -> str:
    for name, value in (("${HOME}", home), ("$HOME", home), ("${XDG_STATE_HOME}", state_home),
                        ("$XDG_STATE_HOME", state_home)):
        word = word.replace(name, value)
    return home + word[1:] if word.startswith("~/") or word == "~" else word


def _names_state(word: str, states: Sequence[str], home: str, state_home: str) -> bool:
    expanded = _expand(word, home, state_home)
    return any(fragment in expanded for fragment in STATE_FRAGMENTS) or any(
        expanded == state or expanded.startswith(state.rstrip("/") + "/") or f"={state}" in expanded
        for state in states)


def decide(command: str, states: Sequence[str] = (), *, home: str | None = None,
           state_home: str | None = None, depth: int = 0) -> str | None:
    """Why the agent's shell must not run ``command`` (None: it may). ``states``: the state folders
    (absolute) of this user; ``home`` / ``state_home``: what ``~``/``$HOME`` and ``$XDG_STATE_HOME``
    stand for (default: this process's)."""
    home = home if home is not None else os.path.expanduser("~")
    state_home = state_home if state_home is not None else os.environ.get("XDG_STATE_HOME", home + "/.local/state")
    for words in _words(command):
        start = _is_model_factory(words)
        if start is not None and start < len(words) and words[start] == "approve":
            return ("`model-factory approve` is for a person, in a terminal of their own: it cannot be run from the "
                    "agent's shell. Ask the user to run the approve command the plan printed, and to give you the "
                    "code it prints.")
        for i, word in enumerate(words[:-2]):
            if _base(word) == "prime" and words[i + 1] == "train" and words[i + 2] in PRIME_ACTIONS and \
                    any(w in ("--yes", "-y") for w in words[i + 3:]):
                return (f"`prime train {words[i + 2]} --yes` acts on runs without asking a person. Use the "
                        f"model-factory tools instead (mf_plan_run and mf_dispatch_run, or mf_stop_run, "
                        f"mf_restart_run ...): they show the plan and ask the user.")
        if start is None and any(_names_state(w, states, home, state_home) for w in words):
            return ("This command names model-factory's state folder (plans, approvals, the audit trail), which "
                    "only model-factory's own commands and tools may change. Use the model-factory tools or "
                    "commands instead.")
        if depth < _MAX_DEPTH:
            for word in words:
                if any(c.isspace() for c in word):  # a quoted command: bash -c "...", script -c "...", eval "..."
                    why = decide(word, states, home=home, state_home=state_home, depth=depth + 1)
                    if why:
                        return why
    return None


def decide_write(path: str, states: Sequence[str] = (), *, home: str | None = None,
                 state_home: str | None = None) -> str | None:
    """Why the host's file tools must not write ``path`` (None: they may)."""
    home = home if home is not None else os.path.expanduser("~")
    state_home = state_home if state_home is not None else os.environ.get("XDG_STATE_HOME", home + "/.local/state")
    if _names_state(os.path.abspath(_expand(path, home, state_home)), states, home, state_home):
        return ("This file is in model-factory's state folder (plans, approvals, the audit trail), which only "
                "model-factory's own commands and tools may change.")
    return None


def _states(argv: Iterable[str]) -> list[str]:
    states, args = [], list(argv)
    for i, arg in enumerate(args):
        if arg == "--state" and i + 1 < len(args):
            states.append(os.path.abspath(os.path.expanduser(args[i + 1])))
    configured = os.environ.get("MODEL_FACTORY_STATE_DIR", "").strip()
    if configured:
        states.append(os.path.abspath(os.path.expanduser(configured)))
    return states


def main(argv: Sequence[str] | None = None) -> int:
    """Read the host's tool call on stdin; exit 2 with the reason on stderr to block it, else 0."""
    states = _states(sys.argv[1:] if argv is None else argv)
    try:
        call = json.load(sys.stdin)
    except ValueError:
        return 0  # not a tool call this guard knows: the host decides
    given = call.get("tool_input") if isinstance(call, dict) else None
    given = given if isinstance(given, dict) else {}
    why = None
    if isinstance(given.get("command"), str):
        why = decide(given["command"], states)
    for key in ("file_path", "notebook_path", "path"):
        if why is None and isinstance(given.get(key), str):
            why = decide_write(given[key], states)
    if why is None:
        return 0
    print(f"Blocked by model-factory's guard hook: {why}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
