"""The ``model-factory`` command: every registry tool as a subcommand, plus demo, emulator,
approve, mcp, install-skill and tools export.

Tool subcommands are built on demand from the registry with argparse (only the invoked
tool's module is imported, and neither typer nor rich on the ``--json`` path: a tool call
as a subprocess starts fast), take the tool's input fields as options (``--tail-lines 200``)
or positional arguments, and print a human rendering or, with ``--json``, the result model
as JSON. The other commands (demo, emulator, approve, mcp, install-skill, tools export)
are typer commands in :mod:`skill.commands`.

Exit codes (also in README.md):

| code | meaning |
|---|---|
| 0 | success |
| 1 | the check ran and failed: validate-config found errors (valid false), preflight not ready (ok false) |
| 2 | usage error (unknown option, bad or out-of-range value) |
| 3 | the tool returned an error (ToolError on stdout with --json) |
| 4 | a human confirmation is required or was refused/invalid |
| 5 | ambiguous outcome: a launch may have happened; reconcile, never repeat |
| 130 | interrupted |
"""

from __future__ import annotations

import argparse
import signal
import sys
import types
import typing
from typing import Any, Literal

EXIT_OK, EXIT_CHECK_FAILED, EXIT_USAGE, EXIT_TOOL_ERROR, EXIT_CONFIRMATION, EXIT_AMBIGUOUS = 0, 1, 2, 3, 4, 5
EXIT_INTERRUPTED = 130
CONFIRMATION_CODES = frozenset(
    {"confirmation_required", "confirmation_invalid", "confirmation_expired", "confirmation_used",
     "plan_changed", "approval_refused"}
)


def exit_code_for(result: Any) -> int:
    """The process exit code for a tool result (see module docstring): a check that ran and
    failed (``valid``/``ok`` false) is 1, so ``model-factory validate-config X && ...`` stops."""
    if not getattr(result, "error", False) or not hasattr(result, "code"):
        failed = getattr(result, "valid", True) is False or getattr(result, "ok", True) is False
        return EXIT_CHECK_FAILED if failed else EXIT_OK
    if result.ambiguous:
        return EXIT_AMBIGUOUS
    if result.code in CONFIRMATION_CODES:
        return EXIT_CONFIRMATION
    if result.code == "bad_arguments":
        return EXIT_USAGE
    return EXIT_TOOL_ERROR


# -- tool commands built from the registry ------------------------------------------------


def _unwrap_optional(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors scrubbed of secret values (a bad value is quoted back)."""

    def error(self, message: str) -> typing.NoReturn:
        from tools.core import Context

        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {Context.from_environment().scrubber.scrub_text(message)}\n")


def tool_parser(spec: Any) -> argparse.ArgumentParser:
    """The argument parser of registry tool ``spec``: positional fields first, in
    ``spec.positional`` order, the others as ``--kebab-case`` options, plus ``--json``."""
    parser = _Parser(prog=f"model-factory {spec.command}", description=spec.description)
    fields = spec.input_model.model_fields
    for name in [*spec.positional, *(n for n in fields if n not in spec.positional)]:
        info = fields[name]
        annotation = _unwrap_optional(info.annotation)
        origin = typing.get_origin(annotation)
        kw: dict[str, Any] = {"help": (info.description or "").replace("%", "%%")}
        if origin is Literal:
            kw["choices"] = [str(v) for v in typing.get_args(annotation)]
        elif origin in (list, tuple):
            kw["action"] = "append"
        elif annotation is bool:
            kw["action"] = argparse.BooleanOptionalAction
        elif annotation in (int, float):
            kw["type"] = annotation
        if name in spec.positional:
            parser.add_argument(name, metavar=name.upper(), nargs=None if info.is_required() else "?", **kw)
        else:
            parser.add_argument("--" + name.replace("_", "-"), dest=name, required=info.is_required(),
                                default=None, **kw)
    parser.add_argument("--json", dest="as_json", action="store_true", help="Print the result as JSON.")
    return parser


def run_tool_command(spec: Any, argv: list[str]) -> int:
    """Parse ``argv`` for tool ``spec``, call it, print the result; return the exit code."""
    values = vars(tool_parser(spec).parse_args(argv))
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
        result = registry.call_tool(name, arguments, ctx)
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


def tool_spec(command: str) -> Any:
    """The registry spec whose CLI command is ``command``, or None."""
    from skill.registry import TOOLS

    return next((spec for spec in TOOLS if spec.command == command), None)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: a tool command runs on the fast argparse path, anything
    else (and ``--help``) goes to the typer app of :mod:`skill.commands`."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--version"]:
        from importlib.metadata import version

        print(f"model-factory-skill {version('model-factory-skill')}")
        return
    spec = tool_spec(argv[0]) if argv else None
    # SIGTERM like Ctrl-C: downloads save their manifest, launches say how to reconcile
    signal.signal(signal.SIGTERM, _terminate)
    try:
        if spec is not None:
            sys.exit(run_tool_command(spec, argv[1:]))
        from skill.commands import app

        app(args=argv, prog_name="model-factory")
    except KeyboardInterrupt:
        print(_interrupted_hint(spec, argv), file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)


def _terminate(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _interrupted_hint(spec: Any, argv: list[str]) -> str:
    """What to do after Ctrl-C; for a launch or stop the request's outcome may be unknown."""
    if spec is not None and spec.name in ("mf_dispatch_run", "mf_stop_run"):
        again = " ".join(["model-factory", *argv[:2]])
        return ("Interrupted. If the request was already sent, its outcome is unknown: do not plan again. "
                f"Run `{again}` once more (it reconciles and never sends twice) or `model-factory list-launches`.")
    if spec is not None and spec.name == "mf_download_traces":
        return "Interrupted. The folder keeps what was downloaded: run the same command again to resume."
    return "Interrupted."
