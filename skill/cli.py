"""The ``model-factory`` command: every registry tool as a subcommand, plus demo, approve,
emulator, mcp, install-skill and tools export.

One parser and one help style for every command: argparse with :class:`_HelpFormatter`
(wrapped to the terminal, at most 100 columns; 80-column terminals get 80). Tool commands are
built on demand from the registry (only the invoked tool's module is imported, and neither rich
nor the MCP SDK on the ``--json`` path: a tool call as a subprocess starts fast); they take the
tool's input fields as options (``--tail-lines 200``) or positional arguments and print a human
rendering or, with ``--json``, the result model as JSON.

Argument values are checked in one place, the registry (:func:`skill.registry.check_arguments`):
the parser passes them on as text, so a bad value gives the same ``bad_arguments`` ToolError on
every surface. Usage errors never quote a value back (it may be a pasted secret): they name the
argument and what it expects, and an unknown option by its name (unless it looks like a key); a
positional argument given as an option (``--dest DIR``) gets the usage line to use. With
``--json`` a usage error is a ToolError-shaped JSON object (``code: bad_arguments``) on stdout;
without it, argparse's usage line and the message on stderr (wrapped at a terminal).
Exit codes: :mod:`skill.exit_codes` (usage errors exit 2).
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import shutil
import signal
import sys
import textwrap
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, NoReturn

from skill.exit_codes import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_PIPE_CLOSED,
    EXIT_TERMINATED,
    EXIT_USAGE,
    Terminated,
    exit_code_for,
    interrupt_for,
)

PROG = "model-factory"
#: Help is wrapped to the terminal's width, but never wider than this.
MAX_HELP_COLUMNS = 100


# -- one parser, one help style -------------------------------------------------------------


class UsageError(Exception):
    """A command line that cannot be run: ``message`` names the argument, never its value;
    ``fields`` are ``(input field, problem)`` pairs when known; ``usage`` is the usage line."""

    def __init__(self, prog: str, message: str, usage: str = "", fields: list[tuple[str, str]] | None = None):
        super().__init__(message)
        self.prog, self.message, self.usage, self.fields = prog, message, usage, fields or []


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's layout at the terminal's width (``COLUMNS``), capped at :data:`MAX_HELP_COLUMNS`;
    lines break at spaces only, so a path, id or command is never split."""

    def __init__(self, prog: str) -> None:
        columns = min(shutil.get_terminal_size((80, 24)).columns, MAX_HELP_COLUMNS)
        super().__init__(prog, width=max(columns, 40) - 2, max_help_position=24)

    def _format_usage(self, usage: Any, actions: Any, groups: Any, prefix: Any) -> str:
        text = super()._format_usage(usage, actions, groups, prefix)
        if usage is not None or max(map(len, text.splitlines())) <= self._width:
            return text
        # Too wide to wrap (an option with a long metavar): name the required arguments only.
        words = [self._format_args(a, self._get_default_metavar_for_positional(a)) for a in actions
                 if not a.option_strings]
        words = [*(f"{a.option_strings[0]} {self._format_args(a, a.dest.upper())}" for a in actions
                   if a.option_strings and a.required), *words]
        return super()._format_usage(" ".join(["%(prog)s [options]", *words]), actions, groups, prefix)

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_long_words=False, break_on_hyphens=False)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return textwrap.fill(" ".join(text.split()), width, initial_indent=indent, subsequent_indent=indent,
                             break_long_words=False, break_on_hyphens=False)


_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_REQUIRED = re.compile(r"the following arguments are required: (.+)")
_ARGUMENT = re.compile(r"^argument ([^:]+): ")


class _Parser(argparse.ArgumentParser):
    """An argparse parser that raises :class:`UsageError` instead of printing and exiting, with
    values removed from argparse's own messages (it quotes a bad value back)."""

    def __init__(self, *, add_help: bool = True, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        kwargs.setdefault("allow_abbrev", False)  # "--t" never silently means "--tail-lines"
        super().__init__(add_help=False, **kwargs)
        self.fields: dict[str, str] = {}  # option string or metavar -> the field it sets
        self._argv: list[str] = []  # the words parse_all was given
        if add_help:
            self.add_argument("-h", "--help", action="help", help="Show this help and exit.")

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        """argparse's, remembering which field each option string and metavar sets (error messages
        name the option or metavar; usage errors report the field)."""
        action = super().add_argument(*args, **kwargs)
        for name in [*action.option_strings, *([action.metavar] if isinstance(action.metavar, str) else [])]:
            self.fields.setdefault(name, action.dest)
        return action

    def error(self, message: str) -> NoReturn:
        message = _QUOTED.sub("(value not shown)", message)
        fields: list[tuple[str, str]] = []
        if required := _REQUIRED.match(message):
            fields = [(self.fields.get(n.strip(), n.strip()), "required") for n in required[1].split(",")]
            options = {o for a in self._actions for o in a.option_strings}
            words = self._argv[:self._argv.index("--")] if "--" in self._argv else self._argv
            unknown = [n for w in words if w.startswith("--") and (n := _option_name(w)) and n not in options]
            if unknown:  # said at once, so one correction fixes both
                message += f"; unknown option{'s' if len(unknown) > 1 else ''} {', '.join(dict.fromkeys(unknown))}"
        elif named := _ARGUMENT.match(message):
            name = named[1].split("/")[0].strip()
            fields = [(self.fields.get(name, name), message[named.end():])]
        raise UsageError(self.prog, message, self.format_usage(), fields)

    def parse_all(self, argv: list[str]) -> dict[str, Any]:
        """Parse ``argv``. A positional argument given as an option (``--dest DIR``) is a usage error
        naming it and the usage line to use; anything else left over is one naming each unknown
        option (:func:`_option_name`) and this command's own options (the closest ones when there
        are), never the values that were given."""
        self._argv = list(argv)
        self._refuse_positional_as_option(argv)
        values, extra = self.parse_known_args(argv)
        if extra:
            ours = sorted({o for a in self._actions for o in a.option_strings if o.startswith("--")})
            typed = [w.split("=", 1)[0] for w in extra if w.startswith("-")]
            named = [n for n in dict.fromkeys(map(_option_name, typed)) if n]
            hidden = sum(1 for w in typed if not _option_name(w))
            close = sorted({m for w in typed for m in difflib.get_close_matches(w, ours, n=2)})
            what = [f"unknown option{'s' if len(named) > 1 else ''} {', '.join(named)}"] if named else []
            what += [f"{hidden} unknown option(s) (not shown)"] if hidden else []
            what += [f"{len(extra) - len(typed)} unexpected value(s) (not shown)"] if len(extra) > len(typed) else []
            hint = f"did you mean {' or '.join(close)}?" if close else f"its options: {', '.join(ours)}"
            raise UsageError(self.prog, f"{' and '.join(what)}; {hint}", self.format_usage(),
                             [("", f"{' and '.join(what)}; {hint}")])
        return vars(values)

    def _refuse_positional_as_option(self, argv: list[str]) -> None:
        """Raise a usage error when a word of ``argv`` (before ``--``) is an option this command does not
        have whose name is one of its positional arguments (``--dest`` for DEST, ``--run-id`` or ``--run``
        for RUN_ID, ``--config`` for CONFIG_PATH): it names them and prints the usage line with the
        positional arguments in order, as the person's shell runs this installation."""
        positional = [a for a in self._actions
                      if not a.option_strings and not isinstance(a, argparse._SubParsersAction)]
        options = {o for a in self._actions for o in a.option_strings}
        typed: dict[str, argparse.Action] = {}
        for word in argv[:argv.index("--")] if "--" in argv else argv:
            name = word.split("=", 1)[0]
            if not name.startswith("-") or name in options:
                continue
            key = name.lstrip("-").lower().replace("-", "_")
            for action in positional:
                dest = action.dest.removesuffix("s") if action.nargs in ("+", "*") else action.dest
                if key in (action.dest, dest, dest.removesuffix("_id"), dest.removesuffix("_path")):
                    typed.setdefault(name, action)
        if not typed:
            return
        from tools.core import program

        metavar = {a.dest: str(a.metavar or a.dest.upper()) for a in positional}
        usage = " ".join([program(), self.prog.removeprefix(PROG).strip(),
                          *(metavar[a.dest] if a.nargs is None else f"{metavar[a.dest]}..." if a.nargs == "+" else
                            f"[{metavar[a.dest]}]" for a in positional)])
        given = list(dict.fromkeys(typed.values()))
        names, args = " and ".join(typed), " and ".join(metavar[a.dest] for a in given)
        subject = f"{names} {'is not an option' if len(typed) == 1 else 'are not options'}"
        what = (f"{args} is positional, given without an option name" if len(given) == 1 else
                f"{args} are positional, given in this order without option names")
        message = f"{subject}: {what}: `{usage}` (any options after)"
        raise UsageError(self.prog, message, self.format_usage(),
                         [(a.dest, f"positional: give {metavar[a.dest]} without {n}") for n, a in typed.items()])


#: What an option name looks like: shown in a usage error (a value never is).
_OPTION_NAME = re.compile(r"--?[A-Za-z][A-Za-z0-9_-]{0,39}")


def _option_name(word: str) -> str | None:
    """The option name a command-line word gives (``--dest`` of ``--dest=out``, its value dropped) when it
    may be shown: shaped like an option name and not like a key (a known key format pasted after ``--``);
    else None."""
    name = word.split("=", 1)[0]
    if not _OPTION_NAME.fullmatch(name):
        return None
    from tools.guardrails.secret_detection import find_secret_values

    return None if find_secret_values(name, root="option") else name


def _choice(*allowed: str) -> Callable[[str], str]:
    """An argparse ``type`` accepting one of ``allowed``; the error names them, not the value."""

    def check(text: str) -> str:
        if text not in allowed:
            raise argparse.ArgumentTypeError(f"expected one of {', '.join(allowed)}")
        return text

    return check


def _number(kind: type, low: float | None = None, high: float | None = None) -> Callable[[str], Any]:
    """An argparse ``type`` for an int or float within ``low..high``; errors name the range."""
    what = "an integer" if kind is int else "a number"
    if low is not None and high is not None:
        what += f" from {low:g} to {high:g}"

    def check(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}") from None
        if value != value or (low is not None and value < low) or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"expected {what}")
        return value

    return check


def _json_option(parser: argparse.ArgumentParser,
                 text: str = "Print the result (or the error) as JSON on stdout.") -> None:
    parser.add_argument("--json", dest="as_json", action="store_true", help=text)


# -- tool commands built from the registry ------------------------------------------------


def _unwrap_optional(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


_TOOL_NAME = re.compile(r"\bmf_([a-z_]+)\b")


def _for_people(text: str) -> str:
    """Help text names commands, not tools (``mf_list_runs`` reads ``list-runs``), and says
    "omitted" where an agent reads "null" (:func:`skill.render.cli_words`)."""
    from skill.render import cli_words

    return cli_words(_TOOL_NAME.sub(lambda m: m[1].replace("_", "-"), text), help=True)


def tool_spec(command: str) -> Any:

    """The registry spec whose CLI command is ``command``, or None."""
    from skill.registry import TOOLS

    return next((spec for spec in TOOLS if spec.command == command), None)


def tool_parser(spec: Any) -> _Parser:
    """The parser of registry tool ``spec``: positional fields first, in ``spec.positional`` order,
    the others as ``--kebab-case`` options (lists repeat the option, booleans have a ``--no-``
    form), plus ``--json``. Values stay text: the registry checks and converts them."""
    parser = _Parser(prog=f"{PROG} {spec.command}", description=_for_people(spec.description))
    fields = spec.input_model.model_fields
    for name in [*spec.positional, *(n for n in fields if n not in spec.positional)]:
        info = fields[name]
        annotation = _unwrap_optional(info.annotation)
        origin = typing.get_origin(annotation)
        kw: dict[str, Any] = {"help": _for_people(info.description or "").replace("%", "%%")}
        if origin is Literal:
            choices = [str(v) for v in typing.get_args(annotation)]
            if not any(c in kw["help"] for c in choices):
                kw["help"] += f" One of: {', '.join(choices)}."
        elif annotation in (int, float):
            kw["metavar"] = "N"
        if origin in (list, tuple) and name in spec.positional:  # RUN_ID RUN_ID ...: one word each
            kw["metavar"] = name.upper().removesuffix("S")
            parser.add_argument(name, nargs="+" if info.is_required() else "*", **kw)
            continue
        if origin in (list, tuple):
            kw["action"] = "append"
            kw["help"] += " Repeat the option for several values."
        elif annotation is bool:
            kw["action"] = argparse.BooleanOptionalAction
        if name in spec.positional:
            kw["metavar"] = name.upper()
            parser.add_argument(name, nargs=None if info.is_required() else "?", **kw)
        else:
            option = "--" + name.replace("_", "-")
            kw.setdefault("metavar", name.upper() if annotation is not bool else None)
            if kw["metavar"] is None:
                del kw["metavar"]
            parser.add_argument(option, dest=name, required=info.is_required(), default=None, **kw)
    _json_option(parser)
    return parser


def run_tool_command(spec: Any, argv: list[str]) -> int:
    """Parse ``argv`` for tool ``spec``, call it, print the result; return the exit code."""
    values = tool_parser(spec).parse_all(argv)
    as_json = values.pop("as_json")
    arguments = {k: v for k, v in values.items() if v is not None}
    return run_tool(spec.name, arguments, as_json=as_json, long_running=spec.long_running)


def run_tool(name: str, arguments: dict[str, Any], *, as_json: bool, long_running: bool = False) -> int:
    """Call a tool through the registry, print its result, return the exit code."""
    from skill import registry
    from tools.core import Context

    ctx = Context.from_environment()
    bar = None
    if long_running and not as_json:
        from skill.render import ProgressBar

        bar = ctx.progress = ProgressBar()
    try:
        result = registry.call_tool(name, arguments, ctx, surface="cli")
    finally:
        ctx.close()
        if bar is not None:
            bar.close()
    if as_json:
        print(result.model_dump_json(indent=2))
    else:
        from skill.render import render  # rich: only for people

        render(name, result)
    return exit_code_for(result)


# -- the other commands ---------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    """A command that is not a registry tool: its name, one-line summary, argument set-up and body."""

    name: str
    summary: str
    description: str
    arguments: Callable[[_Parser], None]
    run: Callable[[dict[str, Any]], int]


#: Emulator clock speed (simulated seconds per wall second): ``emulator --speed`` and ``demo --speed``.
_SPEED = _number(float, 0, 1_000_000)


def _scenario_names() -> list[str]:
    from skill.demo import SCENARIOS

    return list(SCENARIOS)


def _demo_arguments(parser: _Parser) -> None:
    _json_option(parser, "Print the outcome as one JSON object (verdict, evidence, next calls).")
    names = _scenario_names()
    parser.add_argument("--scenario", type=_choice(*names), default="healthy", metavar="NAME",
                        help=f"What happens to the run: {', '.join(names)} (default: healthy). The demo stops at "
                             "the tools' diagnosis.")
    parser.add_argument("--dest", metavar="DIR",
                        help="Folder for the downloaded traces (default ./model-factory-demo/<run_id>).")
    parser.add_argument("--speed", type=_SPEED, metavar="N",
                        help="Simulated seconds each second the demo waits moves the emulator's clock (default "
                             "100; 0 to 1000000, 0 meaning the default).")


def _demo(values: dict[str, Any]) -> int:
    from pathlib import Path

    from skill.demo import run_demo

    dest = Path(values["dest"]) if values["dest"] else None
    return run_demo(as_json=values["as_json"], dest=dest, speed=values["speed"], scenario=values["scenario"])


def _emulator_arguments(parser: _Parser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="Interface to bind (default: 127.0.0.1, loopback).")
    parser.add_argument("--port", type=_number(int, 1, 65535), default=8765, metavar="N",
                        help="Port to listen on (default: 8765).")
    parser.add_argument("--speed", type=_SPEED, metavar="N",
                        help="Clock speed (simulated seconds per wall second).")
    names = [n for n in _scenario_names() if n != "healthy"]
    parser.add_argument("--scenario", type=_choice(*names), metavar="NAME",
                        help=f"Make every run created from now on go wrong this way: {', '.join(names)} (as "
                             "model-factory demo --scenario shows).")



def _emulator(values: dict[str, Any]) -> int:
    from skill.demo import SCENARIOS
    from skill.emulator import serve

    scenario = SCENARIOS[values["scenario"]].emulator if values["scenario"] else None
    try:
        serve(host=values["host"], port=values["port"], speed=values["speed"], scenario=scenario)

    except OSError as exc:
        import errno
        import socket

        # an address this machine does not have, or a name that does not resolve: the host is the problem
        if exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT) or isinstance(exc, socket.gaierror):
            fix = (f"{values['host']} is not an address of this machine: pick another --host (127.0.0.1, the "
                   "default, is the loopback)")
        else:
            fix = "Pick another --port (or stop the process using it)"
        from skill import terminal

        message = f"Cannot listen on {values['host']}:{values['port']}: {exc.strerror or exc}. {fix}."
        print("\n".join(terminal.wrap(message, terminal.stderr().width)), file=sys.stderr)
        return 1
    return EXIT_OK


def _approve_arguments(parser: _Parser) -> None:
    parser.add_argument("plan_id", metavar="PLAN_ID", help="The plan to approve (from plan-run).")
    _json_option(parser, "Refused: approval needs a person at a terminal.")


def _approve(values: dict[str, Any]) -> int:
    from skill.approval import approve_at_terminal

    return approve_at_terminal(values["plan_id"], as_json=values["as_json"])


def _history_arguments(parser: _Parser) -> None:
    parser.add_argument("--run", metavar="RUN_ID", help="Only the calls about this run.")
    parser.add_argument("--since", metavar="WHEN", help="Only the calls since then: 30m, 12h, 1d, 2w, or a date "
                                                         "(2026-12-01) or time (2026-12-01T10:00) in UTC.")
    parser.add_argument("--limit", type=int, default=200, metavar="N", help="At most the newest N calls "
                                                                           "(default 200).")
    _json_option(parser, "The calls as JSON.")


def _history(values: dict[str, Any]) -> int:
    from skill.history import main as history_main

    return history_main(run=values["run"], since=values["since"], limit=values["limit"], as_json=values["as_json"])


def _mcp(values: dict[str, Any]) -> int:
    from skill.mcp_server import main as serve_mcp

    serve_mcp()
    return EXIT_OK


def _install_arguments(parser: _Parser) -> None:
    from skill.install import SKILL_FOLDERS

    agents = list(SKILL_FOLDERS)
    parser.add_argument("--agent", type=_choice(*agents), default="claude-code", metavar="AGENT",
                        help=f"Whose skills folder: {', '.join(agents)} (default: claude-code). Per user: "
                             + "; ".join(f"{a} {u}" for a, (u, _) in SKILL_FOLDERS.items()) + ".")
    parser.add_argument("--project", action="store_true",
                        help="The agent's folder in this project instead: "
                             + "; ".join(f"{a} {p}" for a, (_, p) in SKILL_FOLDERS.items()) + ".")
    parser.add_argument("--dest", metavar="DIR", help="Any other skills folder (overrides --agent and --project).")
    parser.add_argument("--force", action="store_true",
                        help="Replace our earlier copy even where it was edited. A folder model-factory did not "
                             "install is never replaced.")
    parser.add_argument("--hook", action=argparse.BooleanOptionalAction, default=None,
                        help="Also install the guard hook (claude-code: ~/.claude/settings.json; codex: "
                             "~/.codex/hooks.json) that stops the agent's own shell from running `model-factory "
                             "approve`, `prime train run|stop|delete|restart --yes` and commands on the state folder "
                             "(default: ask at a terminal).")
    parser.add_argument("--remove-hook", action="store_true", help="Only remove that guard hook again.")


def _install(values: dict[str, Any]) -> int:
    from skill.install import main as install_main

    return install_main(values["dest"], agent=values["agent"], project=values["project"], force=values["force"],
                        hook=values["hook"], remove=values["remove_hook"])


def _mcp_config_arguments(parser: _Parser) -> None:
    from skill.install import MCP_AGENTS

    agents = list(MCP_AGENTS)
    parser.add_argument("--agent", type=_choice(*agents), required=True, metavar="AGENT",
                        help=f"Which agent: {', '.join(agents)}.")


def _mcp_config(values: dict[str, Any]) -> int:
    from skill.install import mcp_config_main

    return mcp_config_main(values["agent"])


_EXPORT_FORMATS = ("openai", "anthropic", "mcp")


def _tools_arguments(parser: _Parser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION", title="actions")
    export = actions.add_parser("export", help="Print the tool specs as JSON for OpenAI, Anthropic or MCP hosts.",
                                description="Print the tool specs as JSON for OpenAI, Anthropic or MCP hosts.")
    export.add_argument("--format", dest="fmt", type=_choice(*_EXPORT_FORMATS), default="mcp",
                        metavar="{" + ",".join(_EXPORT_FORMATS) + "}", help="Which host's format (default: mcp).")


def _tools(values: dict[str, Any]) -> int:
    from skill import registry

    exporters = {"openai": registry.openai_tools, "anthropic": registry.anthropic_tools, "mcp": registry.mcp_tools}
    print(json.dumps(exporters[values["fmt"]](), indent=2))
    return EXIT_OK


COMMANDS: dict[str, Command] = {c.name: c for c in (
    Command("demo", "Run the whole workflow on the embedded emulator (no account needed).",
            "Run the whole workflow on the embedded emulator: preflight, validate, plan, approve (automatic, "
            "and shown as such), dispatch, monitor to COMPLETED, download traces.", _demo_arguments, _demo),
    Command("approve", "Approve a plan as a person, at an interactive terminal.",
            "Approve a plan as a human, at an interactive terminal; prints the confirmation code. Needs only "
            "the agent's state folder (no API key or secrets); the agent's dispatch re-checks the plan.",
            _approve_arguments, _approve),
    Command("history", "Print every tool call recorded for this user (the audit trail).",
            "Print the tool calls recorded in this user's state store, oldest first: when, from which surface (cli, "
            "mcp, demo), the call and its arguments (secrets scrubbed), the outcome, the run, and money approved or "
            "spent. The store keeps at most 20,000 calls and none older than 180 days.", _history_arguments,
            _history),
    Command("emulator", "Serve the local Model Factory emulator until interrupted.",
            "Serve the local Model Factory emulator until interrupted (prints the env vars to export).",
            _emulator_arguments, _emulator),
    Command("mcp", "Serve every tool over MCP on stdio.",
            "Serve every tool over MCP on stdio (for Claude Code, Claude Desktop, Cursor, Codex).",
            lambda parser: None, _mcp),
    Command("install-skill", "Install the skill text into an agent's skills folder.",
            "Install the skill text (SKILL.md and references/) into DEST/model-factory.", _install_arguments,
            _install),
    Command("mcp-config", "Print an agent's MCP server entry for this installation.",
            "Print the MCP server entry that starts this installation's `mcp` command, in the agent's own format "
            "(claude-code: a `claude mcp add` command; cursor: mcp.json; codex: config.toml; claude-desktop: "
            "claude_desktop_config.json), with an absolute command.", _mcp_config_arguments, _mcp_config),

    Command("tools", "Export the tool catalogue for other hosts (tools export).",
            "Export the tool catalogue for other hosts.", _tools_arguments, _tools),
)}


def command_parser(name: str) -> _Parser | None:
    """The parser of command ``name`` (a registry tool's or one of :data:`COMMANDS`), or None."""
    spec = tool_spec(name)
    if spec is not None:
        return tool_parser(spec)
    command = COMMANDS.get(name)
    if command is None:
        return None
    parser = _Parser(prog=f"{PROG} {name}", description=command.description)
    command.arguments(parser)
    return parser


def top_parser() -> _Parser:
    """The top-level parser: used for ``model-factory --help`` (the list of every command)."""
    from skill.registry import TOOLS

    parser = _Parser(prog=PROG, usage=f"{PROG} [-h] [--version] COMMAND [ARGS]", add_help=False,
                     description="Train models on Prime Intellect's hosted Model Factory, with guardrails. "
                                 f"`{PROG} COMMAND --help` shows a command's arguments.",
                     epilog="Exit codes: 0 ok, 1 a check failed, 2 usage error, 3 tool error, 4 confirmation "
                            "needed or refused, 5 ambiguous outcome (reconcile, never repeat), 130 interrupted, "
                            "141 the reader closed the output early (| head), 143 terminated (SIGTERM).")
    workflow = parser.add_argument_group("commands")
    for command in COMMANDS.values():
        workflow.add_argument(command.name, help=command.summary)
    tools = parser.add_argument_group("tool commands (one per mf_ tool; add --json for the result as JSON)")
    for spec in TOOLS:
        first = _for_people(spec.description).split(". ")[0].rstrip(".")
        tools.add_argument(spec.command, help=first.replace("%", "%%") + ".")  # argparse formats help with %
    options = parser.add_argument_group("options")
    options.add_argument("-h", "--help", action="help", help="Show this help and exit.")
    options.add_argument("--version", action="store_true", help="Print the version and exit.")
    return parser


# -- entry point ----------------------------------------------------------------------------


def _run(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(top_parser().format_help(), end="")
        return EXIT_OK if argv else EXIT_USAGE
    if argv[0] == "--version":
        from importlib.metadata import version

        print(f"model-factory-skill {version('model-factory-skill')}")
        return EXIT_OK
    name = argv[0]
    spec = tool_spec(name)
    if spec is not None:
        return run_tool_command(spec, argv[1:])
    command = COMMANDS.get(name)
    if command is not None:
        parser = _Parser(prog=f"{PROG} {name}", description=command.description)
        command.arguments(parser)
        return command.run(parser.parse_all(argv[1:]))
    from skill.registry import TOOLS

    known = [*COMMANDS, *(s.command for s in TOOLS)]
    close = difflib.get_close_matches(name, known, n=3) if not name.startswith("-") else []
    what = "unknown command"
    if name.startswith("-"):
        after = f"put {name} after the command: {PROG} COMMAND ... {name}" if name == "--json" else \
            "options go after the command"
        what = f"an option before the command ({after})"
    hint = f" (did you mean {' or '.join(close)}?)" if close else ""
    raise UsageError(PROG, f"{what}{hint}", f"usage: {PROG} [-h] [--version] COMMAND [ARGS]\n")


def _print_usage_error(error: UsageError, as_json: bool) -> None:
    """Under ``--json``: the ToolError (``bad_arguments``) on stdout, as a tool's own error would
    be; otherwise argparse's usage line and message on stderr, and how to get help."""
    from tools.core import program

    sub = error.prog.removeprefix(PROG).strip()
    fix = (f"Run `{program()} --help` for the list of commands." if not sub else
           f"Run `{program()} {sub} --help` for its arguments, then call again.")
    if as_json:
        from tools.errors import FieldProblem, ToolError

        fields = [FieldProblem(path=path, problem=problem) for path, problem in error.fields]
        print(ToolError(code="bad_arguments", message=f"{error.prog}: {error.message}", fix=fix,
                        fields=fields).model_dump_json(indent=2))
    else:  # at a terminal, wrapped to its width with each command on a line of its own
        from skill import terminal

        width = terminal.stderr().width
        lines = [*terminal.wrap(f"{error.prog}: error: {error.message}", width, "  ", "", commands=True),
                 *terminal.wrap(fix, width, "  ", "", commands=True)]
        print(error.usage + "\n".join(lines), file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point (exit codes: :mod:`skill.exit_codes`)."""
    argv = sys.argv[1:] if argv is None else argv
    # SIGTERM like Ctrl-C (downloads save their manifest, launches say how to reconcile), then exit 143
    signal.signal(signal.SIGTERM, _terminate)
    try:
        try:
            code = _run(argv)
        except UsageError as error:
            _print_usage_error(error, as_json="--json" in argv)
            code = EXIT_USAGE
        except KeyboardInterrupt as interrupt:
            from skill import terminal  # at a terminal, wrapped, each command bare on a line of its own

            print("\n".join(terminal.wrap(_interrupted_hint(argv), terminal.stderr().width, commands=True)),
                  file=sys.stderr)
            code = EXIT_TERMINATED if isinstance(interrupt, Terminated) else EXIT_INTERRUPTED
            _forget_unhandled_interrupt()
        sys.stdout.flush()
    except BrokenPipeError:  # `model-factory preflight | head -1`: the reader has what it wanted
        code = _pipe_closed()
    sys.exit(code)


def _pipe_closed() -> int:
    """The reader of stdout or stderr went away: send what is still buffered for a closed stream
    nowhere (Python would otherwise report the failed flush at exit) and exit as a tool stopped by
    SIGPIPE does (:data:`EXIT_PIPE_CLOSED`), with no message and no traceback."""
    import os

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, OSError, ValueError):
            try:
                os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
            except (OSError, ValueError):
                pass
    return EXIT_PIPE_CLOSED


def _terminate(signum: int, frame: Any) -> None:
    raise interrupt_for(signum)


def _forget_unhandled_interrupt() -> None:
    """Exit with :data:`EXIT_INTERRUPTED` even when the interrupt came inside code that ``exec`` ran from a
    string (dataclasses make their methods so, while a module is imported): CPython then marks the
    KeyboardInterrupt as unhandled although it was caught, and at exit kills the process with SIGINT in place
    of its exit code. Running any code string clears that mark."""
    exec("")  # an empty string: nothing runs, the mark is cleared


def _interrupted_hint(argv: list[str]) -> str:
    """What to do after Ctrl-C; for a launch or stop the request's outcome may be unknown; a command that
    only reads a run (wait-for-run, get-logs, ...) says the run goes on, and how to watch it again."""
    from tools.core import shell_command

    command = argv[0] if argv else ""
    if command == "dispatch-run" and len(argv) > 1 and not argv[1].startswith("-"):
        return ("Interrupted. If the request was already sent, its outcome is unknown: do not plan again. "
                f"Run `{shell_command(argv[:2])}` once more (it reconciles and never sends twice) or "
                f"`{shell_command(['list-launches'])}`.")
    if command in ("dispatch-run", "stop-run", "pause-run", "restart-run", "resume-run"):
        return ("Interrupted. If the request was already sent, its outcome is unknown: do not plan again. "
                f"See `{shell_command(['list-launches'])}` before anything else.")
    if command in ("download-traces", "download-checkpoint"):
        return ("Interrupted. The folder keeps what was downloaded (not yet complete): run the same command again to "
                "resume.")
    spec = tool_spec(command) if command else None
    if (spec is not None and spec.read_only and spec.positional[:1] == ("run_id",) and len(argv) > 1
            and not argv[1].startswith("-")):  # watching a run: only the watching stopped
        again = "wait again" if command == "wait-for-run" else "look again"
        return (f"Interrupted. Run {argv[1]} keeps going on the platform: this command only watched it. "
                f"To {again}: `{shell_command(argv)}`; to see where it is: "
                f"`{shell_command(['check-progress', argv[1]])}`.")
    return "Interrupted."
