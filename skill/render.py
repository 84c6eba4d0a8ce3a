"""Human rendering of tool results for the command line (rich tables, progress bars).

Generic by design: scalar fields become a two-column table, lists of objects become a table
whose columns are the items' scalar fields. Errors go to stderr with their ``fix``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

_out = Console(soft_wrap=True)
_err = Console(stderr=True, soft_wrap=True)
_MAX_ROWS = 50


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _list_table(title: str, items: list[Any]) -> Table:
    dumped = [i.model_dump() if isinstance(i, BaseModel) else i for i in items]
    if dumped and isinstance(dumped[0], dict):
        columns = [k for k, v in dumped[0].items() if _scalar(v)][:8]
    else:
        columns = ["value"]
        dumped = [{"value": d} for d in dumped]
    table = Table(title=title, title_justify="left", show_lines=False)
    for column in columns:
        table.add_column(column)
    for row in dumped[:_MAX_ROWS]:
        table.add_row(*(_cell(row.get(c)) for c in columns))
    if len(dumped) > _MAX_ROWS:
        table.caption = f"{len(dumped) - _MAX_ROWS} more rows not shown (use --json)"
    return table


def render(name: str, result: BaseModel) -> None:
    """Print ``result`` of tool ``name`` for a person."""
    if getattr(result, "error", False) is True and hasattr(result, "fix"):
        _err.print(f"[bold red]Error[/] [{result.code}] {result.message}", markup=True, highlight=False)
        for field in getattr(result, "fields", []):
            _err.print(f"  - {field.path or '(input)'}: {field.problem}", markup=False, highlight=False)
        _err.print(f"[bold]Fix:[/] {result.fix}", highlight=False)
        return
    summary = Table(show_header=False, box=None, pad_edge=False)
    summary.add_column(style="bold")
    summary.add_column()
    tables = []
    for key, value in result:
        if isinstance(value, list) and value and not all(_scalar(v) for v in value):
            tables.append(_list_table(key, value))
        elif isinstance(value, BaseModel):
            for sub_key, sub_value in value:
                if _scalar(sub_value):
                    summary.add_row(f"{key}.{sub_key}", _cell(sub_value))
        elif isinstance(value, list):
            summary.add_row(key, ", ".join(_cell(v) for v in value) or "-")
        elif _scalar(value):
            summary.add_row(key, _cell(value))
    _out.print(summary)
    for table in tables:
        _out.print(table)


def progress_printer():
    """A ``progress(done, total, message)`` callback drawing a progress bar on stderr."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed:.0f}/{task.total}"),
                        TimeElapsedColumn(), console=_err, transient=True)
    task = None

    def update(done: float, total: float | None, message: str) -> None:
        nonlocal task
        if task is None:
            progress.start()
            task = progress.add_task(message, total=total)
        progress.update(task, completed=done, total=total, description=message)
        if total is not None and done >= total:
            progress.stop()

    return update
