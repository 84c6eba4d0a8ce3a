"""The typer side of ``model-factory``: demo, emulator, approve, mcp, install-skill, tools
export, and the top-level ``--help`` that lists every tool command too.

Tool commands themselves are parsed and run by :mod:`skill.cli` (argparse); here they
appear in the command list, and a tool command reached through typer is handed over to it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperGroup

from skill.cli import EXIT_USAGE, run_tool_command, tool_spec


def _forward(spec: Any) -> Any:
    """A typer command that lists ``spec`` in ``--help`` and hands its arguments to argparse."""
    single = typer.Typer(add_completion=False, rich_markup_mode=None)

    @single.command(spec.command, help=spec.description, add_help_option=False,
                    short_help=spec.description.split(". ")[0].rstrip(".") + ".",
                    context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
    def command(ctx: typer.Context) -> None:
        raise typer.Exit(run_tool_command(spec, list(ctx.args)))

    return typer.main.get_command(single)


class ToolGroup(TyperGroup):
    """Typer group that also lists one command per registry tool."""

    def list_commands(self, ctx: Any) -> list[str]:
        """The typer commands, then one per registry tool (``get-run``, ...)."""
        from skill.registry import TOOLS

        return [*super().list_commands(ctx), *(spec.command for spec in TOOLS)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        """A typer command, else a forwarder of the registry tool called ``cmd_name`` (None if neither)."""
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            return command
        spec = tool_spec(cmd_name)
        return _forward(spec) if spec else None


app = typer.Typer(
    cls=ToolGroup,
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,  # tool descriptions name TOML tables like [deployment]: not markup
    help="Train models on Prime Intellect's hosted Model Factory, with guardrails. "
    "Every mf_ tool is a subcommand (`model-factory get-run RUN_ID --json`; "
    "`model-factory get-run --help` for its arguments; `model-factory --version`).",
)


@app.command()
def demo(
    as_json: bool = typer.Option(False, "--json", help="Print the summary as one JSON object."),
    dest: Path = typer.Option(None, help="Folder for the downloaded traces (default ./model-factory-demo/<run_id>)."),  # noqa: B008
    speed: float = typer.Option(None, help="Emulator clock speed (simulated seconds per second)."),
) -> None:
    """Run the whole workflow on the embedded emulator: preflight, validate, plan, approve
    (automatic, and shown as such), dispatch, monitor to COMPLETED, download traces."""
    from skill.demo import run_demo

    sys.exit(run_demo(as_json=as_json, dest=dest, speed=speed))


@app.command()
def emulator(
    host: str = typer.Option("127.0.0.1", help="Interface to bind (loopback by default)."),
    port: int = typer.Option(8765, min=1, max=65535, help="Port to listen on."),
    speed: float = typer.Option(None, min=0, max=1_000_000, help="Clock speed (simulated seconds per wall second)."),
) -> None:
    """Serve the local Model Factory emulator until interrupted."""
    from skill.emulator import serve

    try:
        serve(host=host, port=port, speed=speed)
    except OSError as exc:
        typer.echo(f"Cannot listen on {host}:{port}: {exc.strerror or exc}. Pick another --port "
                   "(or stop the process using it).", err=True)
        raise typer.Exit(1) from None


@app.command()
def approve(
    plan_id: str = typer.Argument(..., help="The plan to approve (from plan-run)."),
    as_json: bool = typer.Option(False, "--json", help="Refused: approval needs a person at a terminal."),
) -> None:
    """Approve a plan as a human, at an interactive terminal; prints the confirmation code. Needs only
    the agent's state folder (no API key or secrets); the agent's dispatch re-checks the plan."""
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
