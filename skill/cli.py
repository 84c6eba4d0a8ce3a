"""The ``model-factory`` command: every registry tool as a subcommand, plus demo, emulator,
approve, mcp, install-skill and tools export.

Tool subcommands are built on demand from the registry (only the invoked tool's module is
imported), take the tool's input fields as options (``--tail-lines 200``) or positional
arguments, print a human rendering or, with ``--json``, the result model as JSON.

Exit codes (also in README.md):

| code | meaning |
|---|---|
| 0 | success |
| 2 | usage error (unknown option, bad value) |
| 3 | the tool returned an error (ToolError on stdout with --json) |
| 4 | a human confirmation is required or was refused/invalid |
| 5 | ambiguous outcome: a launch may have happened; reconcile, never repeat |
| 130 | interrupted |
"""

from __future__ import annotations

import inspect
import json
import sys
import types
import typing
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from typer.core import TyperGroup

EXIT_OK, EXIT_USAGE, EXIT_TOOL_ERROR, EXIT_CONFIRMATION, EXIT_AMBIGUOUS = 0, 2, 3, 4, 5
CONFIRMATION_CODES = frozenset(
    {"confirmation_required", "confirmation_invalid", "confirmation_expired", "confirmation_used",
     "plan_changed", "approval_refused"}
)


def exit_code_for(result: Any) -> int:
    """The process exit code for a tool result (see module docstring)."""
    if not getattr(result, "error", False) or not hasattr(result, "code"):
        return EXIT_OK
    if result.ambiguous:
        return EXIT_AMBIGUOUS
    if result.code in CONFIRMATION_CODES:
        return EXIT_CONFIRMATION
    return EXIT_TOOL_ERROR


# -- tool commands built from the registry ------------------------------------------------


def _unwrap_optional(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _parameter(name: str, info: Any, positional: bool) -> inspect.Parameter:
    """A typer parameter (as a signature entry) for one pydantic input field."""
    annotation = _unwrap_optional(info.annotation)
    origin = typing.get_origin(annotation)
    help_text = (info.description or "").strip()
    required = info.is_required()
    default = ... if required else (None if info.default is None else info.default)
    kind: Any = str
    if origin is Literal:
        kind = Enum(f"{name}_choice", {str(v): str(v) for v in typing.get_args(annotation)}, type=str)
        default = default if default in (..., None) else kind(str(default))
    elif origin in (list, tuple):
        inner = _unwrap_optional(typing.get_args(annotation)[0]) if typing.get_args(annotation) else str
        kind = list[{int: int, float: float}.get(inner, str)]
        default = ... if required else None
    elif annotation in (bool, int, float):
        kind = annotation
    if positional:
        marker = typer.Argument(help=help_text, metavar=name.upper(), show_default=default not in (..., None))
    else:
        flag = "--" + name.replace("_", "-")
        decls = [f"{flag}/--no-{name.replace('_', '-')}"] if kind is bool else [flag]
        marker = typer.Option(*decls, help=help_text, show_default=default not in (..., None))
    hint = kind if required or kind is bool and default is not None else kind | None
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=Annotated[hint, marker])


def build_tool_command(spec: Any) -> Any:
    """A command for registry tool ``spec``: positional fields first, the others as options."""
    fields = spec.input_model.model_fields
    order = [*spec.positional, *(n for n in fields if n not in spec.positional)]
    params = [_parameter(name, fields[name], name in spec.positional) for name in order]
    params.append(inspect.Parameter("as_json", inspect.Parameter.KEYWORD_ONLY, default=False,
                                    annotation=Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]))

    def command(**values: Any) -> None:
        as_json = values.pop("as_json")
        arguments = {k: (v.value if isinstance(v, Enum) else v) for k, v in values.items()}
        arguments = {k: v for k, v in arguments.items() if v is not None and v != []}
        raise typer.Exit(run_tool(spec.name, arguments, as_json=as_json, long_running=spec.long_running))

    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__doc__ = spec.description
    single = typer.Typer(add_completion=False, rich_markup_mode=None)
    single.command(spec.command, help=spec.description,
                   short_help=spec.description.split(". ")[0].rstrip(".") + ".")(command)
    return typer.main.get_command(single)


def run_tool(name: str, arguments: dict[str, Any], *, as_json: bool, long_running: bool = False) -> int:
    """Call a tool through the registry, print its result, return the exit code."""
    from skill import registry
    from skill.render import ProgressBar, render
    from tools.context import Context

    ctx = Context.from_environment()
    bar = ProgressBar() if long_running and not as_json else None
    ctx.progress = bar
    try:
        result = registry.call_tool(name, arguments, ctx)
    finally:
        ctx.close()
        if bar is not None:
            bar.close()
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
    else:
        render(name, result)
    return exit_code_for(result)


class ToolGroup(TyperGroup):
    """Typer group that adds one lazily-built command per registry tool."""

    def list_commands(self, ctx: Any) -> list[str]:
        from skill.registry import TOOLS

        return [*super().list_commands(ctx), *(spec.command for spec in TOOLS)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            return command
        from skill.registry import TOOLS

        spec = next((s for s in TOOLS if s.command == cmd_name), None)
        return build_tool_command(spec) if spec else None

    def invoke(self, ctx: Any) -> Any:
        """Run the subcommand; a usage error (it may quote the bad value) is scrubbed before click shows it."""
        try:
            return super().invoke(ctx)
        except Exception as exc:  # click's UsageError/BadParameter (typer vendors click): scrub, re-raise
            if isinstance(getattr(exc, "message", None), str):
                from tools.context import Context

                exc.message = Context.from_environment().scrubber.scrub_text(exc.message)
            raise


app = typer.Typer(
    cls=ToolGroup,
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,  # tool descriptions name TOML tables like [deployment]: not markup
    help="Train models on Prime Intellect's hosted Model Factory, with guardrails. "
    "Every mf_ tool is a subcommand (`model-factory get-run RUN_ID --json`).",
)


@app.command()
def demo(
    as_json: bool = typer.Option(False, "--json", help="Print the summary as one JSON object."),
    dest: Path = typer.Option(None, help="Folder for the downloaded traces (default ./model-factory-demo/<run_id>)."),
    speed: float = typer.Option(None, help="Emulator clock speed (simulated seconds per second)."),
) -> None:
    """Run the whole workflow on the embedded emulator: preflight, validate, plan, approve
    (automatic, and shown as such), dispatch, monitor to COMPLETED, download traces."""
    from skill.demo import run_demo

    sys.exit(run_demo(as_json=as_json, dest=dest, speed=speed))


@app.command()
def emulator(
    host: str = typer.Option("127.0.0.1", help="Interface to bind (loopback by default)."),
    port: int = typer.Option(8765, help="Port to listen on."),
    speed: float = typer.Option(None, help="Clock speed (simulated seconds per wall second)."),
) -> None:
    """Serve the local Model Factory emulator until interrupted."""
    from skill.emulator import serve

    serve(host=host, port=port, speed=speed)


@app.command()
def approve(
    plan_id: str = typer.Argument(..., help="The plan to approve (from plan-run)."),
    as_json: bool = typer.Option(False, "--json", help="Refused: approval needs a person at a terminal."),
) -> None:
    """Approve a plan as a human, at an interactive terminal; prints the confirmation code."""
    from skill.approval import approve_at_terminal

    sys.exit(approve_at_terminal(plan_id, as_json=as_json))


@app.command()
def mcp() -> None:
    """Serve every tool over MCP on stdio (for Claude Code, Claude Desktop, Cursor, Codex)."""
    from skill.mcp_server import main as serve_mcp

    serve_mcp()


@app.command("install-skill")
def install_skill(
    dest: str = typer.Option("~/.claude/skills", help="Skills folder of your agent (Claude Code: ~/.claude/skills "
                             "or .claude/skills in a project; Codex: ~/.codex/skills)."),
    force: bool = typer.Option(False, "--force", help="Replace a different existing copy of the skill."),
) -> None:
    """Install the skill text (SKILL.md and references/) into DEST/model-factory."""
    from skill.install import main as install_main

    sys.exit(install_main(dest, force=force))


tools_app = typer.Typer(help="Export the tool catalogue for other hosts.", no_args_is_help=True)
app.add_typer(tools_app, name="tools")


@tools_app.command("export")
def tools_export(
    fmt: str = typer.Option("mcp", "--format", help="openai | anthropic | mcp"),
) -> None:
    """Print the tool specs as JSON for OpenAI, Anthropic or MCP hosts."""
    from skill import registry

    exporters = {"openai": registry.openai_tools, "anthropic": registry.anthropic_tools, "mcp": registry.mcp_tools}
    if fmt not in exporters:
        typer.echo(f"Unknown format {fmt!r}: use one of openai, anthropic, mcp.", err=True)
        raise typer.Exit(EXIT_USAGE)
    typer.echo(json.dumps(exporters[fmt](), indent=2))


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
