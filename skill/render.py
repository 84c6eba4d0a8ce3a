"""Human rendering of tool results for the command line (rich tables, progress bars).

Generic by design: a result with a ``summary`` text prints that text; otherwise scalar
fields become a two-column table. Lists of objects become tables of their short scalar
columns. ``next_step`` closes the output. Errors go to stderr with their ``fix``. The full
result is always one ``--json`` away.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from rich.console import Console
from rich.markup import escape
from rich.table import Table

_out = Console(soft_wrap=True, highlight=False)
_err = Console(stderr=True, soft_wrap=True, highlight=False)
_MAX_ROWS = 50
_MAX_COLUMNS = 7
_LONG_TEXT = 80


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _list_table(title: str, items: list[Any]) -> Table:
    rows = [i.model_dump() if isinstance(i, BaseModel) else i for i in items]
    if rows and isinstance(rows[0], dict):
        columns = [k for k, v in rows[0].items() if _scalar(v)][:_MAX_COLUMNS]
    else:
        columns, rows = ["value"], [{"value": r} for r in rows]
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows[:_MAX_ROWS]:
        table.add_row(*(escape(_cell(row.get(c))) for c in columns))
    if len(rows) > _MAX_ROWS:
        table.caption = f"{len(rows) - _MAX_ROWS} more rows not shown (use --json)"
    return table


def render_error(error: Any) -> None:
    """Print a ToolError to stderr: code, message, each bad field, and the fix."""
    _err.print(f"[bold red]Error[/] \\[{escape(error.code)}] {escape(error.message)}")
    for problem in getattr(error, "fields", []):
        _err.print(f"  - {escape(problem.path or '(input)')}: {escape(problem.problem)}")
    _err.print(f"[bold]Fix:[/] {escape(error.fix)}")


def render(name: str, result: BaseModel) -> None:
    """Print ``result`` of tool ``name`` for a person."""
    if getattr(result, "error", False) is True and hasattr(result, "fix"):
        render_error(result)
        return
    summary = getattr(result, "summary", None)
    tables = [_list_table(key, value) for key, value in result
              if isinstance(value, list) and value and not all(_scalar(v) for v in value)]
    if isinstance(summary, str) and summary:
        _out.print(escape(summary))
    else:
        facts = Table(show_header=False, box=None, pad_edge=False)
        facts.add_column(style="bold")
        facts.add_column(overflow="fold")
        for key, value in result:
            if key == "next_step":
                continue
            if isinstance(value, BaseModel):
                for sub_key, sub_value in value:
                    if _scalar(sub_value):
                        facts.add_row(f"{key}.{sub_key}", escape(_cell(sub_value)))
            elif isinstance(value, list) and all(_scalar(v) for v in value):
                facts.add_row(key, escape(", ".join(_cell(v) for v in value) or "-"))
            elif _scalar(value) and len(_cell(value)) <= _LONG_TEXT * 4:
                facts.add_row(key, escape(_cell(value)))
        _out.print(facts)
    for table in tables:
        _out.print(table)
    next_step = getattr(result, "next_step", None)
    if isinstance(next_step, str) and next_step:
        _out.print(f"[bold]Next:[/] {escape(next_step)}")


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
        """Stop drawing (the bar is transient: it disappears)."""
        if self._task is not None:
            self._progress.stop()
