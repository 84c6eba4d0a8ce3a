"""Human rendering of tool results for the command line (rich tables, progress bars).

Generic by design, driven by the shape of the result model:

- a ``summary`` text is printed as is; otherwise the scalar fields become a two-column table
  (mappings as ``key=value`` lists, nested models flattened one level);
- a list of objects becomes a table of their short fields (preferred columns for a few wide
  lists); each item of ``components`` gets a section of its own, with its nested tables;
- a list of rows with a sibling ``columns`` list becomes a table with those headers;
- ``next_step`` closes the output. Errors go to stderr with their ``fix``.

Texts written for agents name tools (``mf_get_run``); on the command line they read as the
matching command (``model-factory get-run``). The full result is one ``--json`` away.
"""

from __future__ import annotations

import re
import shlex
import sys
from typing import Any

from pydantic import BaseModel
from rich.console import Console
from rich.markup import escape
from rich.table import Table

#: Piped output is not wrapped at 80 columns (URLs, cursors and paths stay whole).
_WIDTH = None if sys.stdout.isatty() else 200
_out = Console(soft_wrap=True, highlight=False, width=_WIDTH)
_err = Console(stderr=True, soft_wrap=True, highlight=False, width=None if sys.stderr.isatty() else 200)
_MAX_ROWS = 50
_MAX_COLUMNS = 9
#: Lists whose items each get a section (their own nested lists shown as tables).
_SECTIONED = frozenset({"components"})
#: Preferred columns of some wide lists (the rest is in --json).
_COLUMNS = {
    "launches": ["plan_id", "action", "status", "outcome", "run_id", "owner", "gpu_type", "gpu_count", "usd_high",
                 "approval_channel", "attempts", "last_activity"],
    "examples": ["id", "mode", "model_name", "max_steps", "gpu_count", "hosted_ok", "hosted_reason"],
    "models": ["name", "gpu_types"],
}


_CALL = re.compile(r"\bmf_([a-z_]+)((?:(?:\s+with|\s*,|\s+and)?\s+[a-z_]+=(?:'[^']*'|-?\d+))*)")
_ARGUMENT = re.compile(r"([a-z_]+)=(?:'([^']*)'|(-?\d+))")


def as_command(text: str) -> str:
    """A text meant for an agent, as a person at a shell reads it: ``mf_get_run run_id='X'``
    becomes ``model-factory get-run X`` (positional fields in place, others as ``--options``)."""
    from skill import registry

    def command(match: re.Match[str]) -> str:
        try:
            spec = registry.get(match[1])
        except KeyError:
            return match[0]
        words = ["model-factory", spec.command]
        for name, quoted, number in _ARGUMENT.findall(match[2]):
            value = shlex.quote(quoted if number == "" else number)
            words += [value] if name in spec.positional else [f"--{name.replace('_', '-')}", value]
        return " ".join(words)

    return _CALL.sub(command, text)


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:.4g}"
    if isinstance(value, dict):
        return ", ".join(f"{k}={_cell(v)}" for k, v in value.items() if v not in (0, None)) or "-"
    if isinstance(value, (list, tuple)):
        if all(_scalar(v) for v in value):
            sentences = any(isinstance(v, str) and v.endswith(".") for v in value)
            return (" " if sentences else ", ").join(_cell(v) for v in value) or "-"
        return f"({len(value)} items)"
    if isinstance(value, BaseModel):
        return _cell(value.model_dump())
    return str(value)


def _plain(value: Any) -> Any:
    return value.model_dump() if isinstance(value, BaseModel) else value


def _objects(value: Any) -> bool:
    """A non-empty list of objects (models or dicts)."""
    return isinstance(value, list) and bool(value) and all(isinstance(v, (BaseModel, dict)) for v in value)


def _table(title: str, rows: list[dict[str, Any]], columns: list[str]) -> Table:
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows[:_MAX_ROWS]:
        table.add_row(*(escape(_cell(row.get(c))) for c in columns))
    if len(rows) > _MAX_ROWS:
        table.caption = f"{len(rows) - _MAX_ROWS} more rows not shown (use --json)"
    return table


def _object_table(title: str, items: list[Any]) -> Table:
    rows = [_plain(i) for i in items]
    columns = [c for c in _COLUMNS.get(title, []) if c in rows[0]] or [
        k for k, v in rows[0].items() if not _objects(v)][:_MAX_COLUMNS]
    return _table(title, rows, columns)


def _facts(fields: dict[str, Any]) -> Table:
    facts = Table(show_header=False, box=None, pad_edge=False)
    facts.add_column(style="bold")
    facts.add_column(overflow="fold")
    for key, value in fields.items():
        if isinstance(value, BaseModel):
            for sub_key, sub_value in value:
                if not _objects(sub_value):
                    facts.add_row(f"{key}.{sub_key}", escape(_cell(sub_value)))
        elif not _objects(value):
            facts.add_row(key, escape(_cell(value)))
    return facts


def _sections(fields: dict[str, Any], depth: int = 0) -> None:
    """Tables for the lists of objects in ``fields``; nested lists get their own section."""
    for key, value in fields.items():
        if key == "rows" and isinstance(value, list) and isinstance(fields.get("columns"), list) and value:
            columns = fields["columns"]
            _out.print(_table(key, [dict(zip(columns, row, strict=False)) for row in value], columns))
        elif _objects(value):
            if key in _SECTIONED and depth < 2:
                for item in value[:_MAX_ROWS]:
                    item = _plain(item)
                    head = {k: v for k, v in item.items() if not _objects(v)}
                    _out.print(f"\n[bold]{escape(key)}[/]: " + escape("  ".join(
                        f"{k}={_cell(v)}" for k, v in head.items() if v not in (None, "", [], {}))))
                    _sections(item, depth + 1)
            else:
                _out.print(_object_table(key, value))


def render_error(error: Any) -> None:
    """Print a ToolError to stderr: code, message, each bad field, and the fix."""
    _err.print(f"[bold red]Error[/] \\[{escape(error.code)}] {escape(error.message)}")
    for problem in getattr(error, "fields", []):
        _err.print(f"  - {escape(problem.path or '(input)')}: {escape(problem.problem)}")
    _err.print(f"[bold]Fix:[/] {escape(as_command(error.fix))}")


def render(name: str, result: BaseModel) -> None:
    """Print ``result`` of tool ``name`` for a person."""
    if getattr(result, "error", False) is True and hasattr(result, "fix"):
        render_error(result)
        return
    fields = {k: v for k, v in result if k != "next_step"}
    summary = fields.get("summary")
    if isinstance(summary, str) and summary:
        _out.print(escape(summary))
    else:
        _out.print(_facts({k: v for k, v in fields.items() if not (k in ("columns", "rows") and "rows" in fields)}))
    _sections(fields)
    next_step = getattr(result, "next_step", None)
    if isinstance(next_step, str) and next_step:
        _out.print(f"[bold]Next:[/] {escape(as_command(next_step))}")


class ProgressBar:
    """A ``progress(done, total, message)`` callback drawing a bar on stderr; ``close()`` ends it."""

    def __init__(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                  TimeElapsedColumn(), console=_err, transient=True)
        self._task: Any = None

    def __call__(self, done: float, total: float | None, message: str) -> None:
        if self._task is None:
            self._progress.start()
            self._task = self._progress.add_task(escape(message), total=total)
        self._progress.update(self._task, completed=done, total=total, description=escape(message))

    def close(self) -> None:
        """Stop drawing (the bar is transient: it leaves no line behind)."""
        if self._task is not None:
            self._progress.stop()
