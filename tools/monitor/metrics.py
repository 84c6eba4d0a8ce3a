"""Metric tools: per-step metrics of a run as numbers (:func:`get_metrics`) or as a PNG
(:func:`plot_metrics`).

Source: GET ``/rft/runs/{id}/metrics?min_step=&max_step=`` (reference/prime-api.md §5.7).
The records pass through from prime-rl untouched: flat objects with ``step`` (and often
``timestamp``) and numeric keys such as ``reward/all/mean``, ``loss``, ``entropy``. Records
of the same step are merged.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from tools.core import MAX_STEPS, RUN_ID, Context, fit_largest, require_run_on_404, tool
from tools.errors import FieldProblem, call, fail
from tools.monitor._series import is_number, merge_steps, reward_key
from tools.platform.client import PlatformClient
from tools.platform.files import write_atomic
from tools.units import Bytes

#: Columns shown by default when a run logs more metrics than this.
DEFAULT_METRIC_COLUMNS = 6
#: Metric names listed at most in metric_names.
MAX_LISTED_NAMES = 100
_PRIORITY = ("reward", "loss", "entropy", "grad_norm", "seq_len", "learning_rate", "throughput", "time")


def _metric_names(records: list[dict]) -> list[str]:
    """Numeric metric keys (``step`` aside), rewards and losses first, then alphabetical."""
    names = {k for r in records for k, v in r.items() if k != "step" and is_number(v)}

    def rank(name: str) -> tuple[int, str]:
        return next((i for i, p in enumerate(_PRIORITY) if name.startswith(p)), len(_PRIORITY)), name

    return sorted(names, key=rank)


def _select(names: list[str], wanted: list[str] | None, default_count: int) -> list[str]:
    if not wanted:
        return names[:default_count]
    chosen: list[str] = []
    unknown = []
    for want in wanted:
        hits = [n for n in names if n.startswith(want)]  # a prefix of the full name: grad -> grad_norm
        if not hits:
            unknown.append(want)
        chosen += [h for h in hits if h not in chosen]
    if unknown:
        available = ", ".join(names[:40]) or "(none yet)"
        raise fail("bad_arguments", f"No metric name starts with {', '.join(map(repr, unknown))}. Available: "
                   f"{available}.", "Call again with names (or the start of names, e.g. reward or grad) from the "
                   "available list.", fields=[FieldProblem(path="names", problem="matches no metric")])
    return chosen


def _downsample(items: list, k: int) -> list:
    """``k`` items spread evenly, always the first and the last (``k == 1``: the last)."""
    n = len(items)
    if k >= n:
        return list(items)
    if k <= 0:
        return []
    if k == 1:
        return [items[-1]]
    picks = sorted({round(i * (n - 1) / (k - 1)) for i in range(k)})
    return [items[i] for i in picks]


def records_of(platform: PlatformClient, run_id: str, min_step: int | None, max_step: int | None) -> list[dict]:
    """Metric records of a step range, oldest first, one per step (records of a step merged)."""
    return merge_steps(platform.get_metrics(run_id, min_step=min_step, max_step=max_step).metrics)


class GetMetricsInput(BaseModel):
    """Which run, which steps and metrics, how many points."""

    model_config = ConfigDict(extra="forbid")
    run_id: str = RUN_ID
    min_step: int | None = Field(default=None, ge=0, le=MAX_STEPS, description="First step to include.")
    max_step: int | None = Field(default=None, ge=0, le=MAX_STEPS, description="Last step to include.")
    names: list[str] | None = Field(default=None, description=(
        f"Metric names, or the start of names ('reward' selects every reward/... metric, 'grad' grad_norm): every "
        f"match is included. Default: all, or the first {DEFAULT_METRIC_COLUMNS} (rewards, loss, entropy first) when "
        "there are more."))
    max_points: int = Field(default=20, ge=2, le=500, description=(
        "Rows (steps) to return at most, spread evenly; the first and last step are always kept."))


class MetricStats(BaseModel):
    """Summary of one metric over the steps read."""

    name: str = Field(description="Metric name.")
    first: float | None = Field(default=None, description="Value at the first step read.")
    last: float | None = Field(default=None, description="Value at the last step read.")
    min: float | None = Field(default=None, description="Smallest value.")
    max: float | None = Field(default=None, description="Largest value.")
    steps: int = Field(description="Steps with a value.")


class GetMetricsResult(BaseModel):
    """Per-step metrics (GET ``/rft/runs/{id}/metrics``), downsampled to the budget."""

    run_id: str = Field(description="Run id.")
    metric_names: list[str] = Field(description=(
        "Metrics the run logged in the range (rewards, losses first; at most 100 listed)."))
    columns: list[str] = Field(description="Column names of rows: 'step' then the selected metrics.")
    rows: list[list[float | None]] = Field(description=(
        "One row per kept step, values in the order of columns (null = not logged at that step)."))
    steps_available: int = Field(description="Steps with metrics in the range.")
    first_step: int | None = Field(default=None, description="First step in the range.")
    last_step: int | None = Field(default=None, description="Last step in the range.")
    final: dict[str, float] = Field(description=(
        "Last logged value of each selected metric, e.g. final['reward/all/mean']."))
    stats: list[MetricStats] = Field(description="first/last/min/max of each selected metric.")
    truncated: bool = Field(default=False, description=(
        "True when steps (or metric names) were left out to fit max_points or the budget."))
    omitted: int = Field(default=0, description="Steps of the range not in rows.")
    narrow_hint: str | None = Field(default=None, description="How to see more detail.")


@tool
def get_metrics(inp: GetMetricsInput, ctx: Context) -> GetMetricsResult:
    """Read a run's per-step metrics, evenly downsampled to ``max_points`` and the budget.

    Source: GET ``/rft/runs/{id}/metrics?min_step=&max_step=`` (records pass through from
    prime-rl: flat objects with ``step`` and numeric keys such as ``reward/all/mean``).
    Errors: ``not_found``, ``bad_arguments`` (unknown metric name), the platform codes.
    """
    if inp.min_step is not None and inp.max_step is not None and inp.min_step > inp.max_step:
        raise fail("bad_arguments", "min_step is larger than max_step.", "Swap them or leave one out.")
    with require_run_on_404(ctx, inp.run_id):
        records = records_of(ctx.platform(), inp.run_id, inp.min_step, inp.max_step)
    names = _metric_names(records)
    selected = _select(names, inp.names, DEFAULT_METRIC_COLUMNS)
    series = {n: [(r["step"], float(r[n])) for r in records if is_number(r.get(n))] for n in selected}
    stats = [MetricStats(name=n, first=s[0][1], last=s[-1][1], min=min(v for _, v in s), max=max(v for _, v in s),
                         steps=len(s)) if s else MetricStats(name=n, steps=0) for n, s in series.items()]
    final = {n: s[-1][1] for n, s in series.items() if s}
    table = [[float(r["step"]), *[float(r[n]) if is_number(r.get(n)) else None for n in selected]] for r in records]
    hidden_names = len(names) - len(selected) if not inp.names else 0

    def build(k: int) -> GetMetricsResult:
        rows = _downsample(table, k)
        cut = len(table) - len(rows)
        hint = None
        if cut or hidden_names:
            hint = ("Narrow the step range (min and max step) or pick fewer names for more points per step."
                    + (f" {hidden_names} more metric(s) are listed in metric_names; name them to see them."
                       if hidden_names else ""))
        return GetMetricsResult(
            run_id=inp.run_id, metric_names=names[:MAX_LISTED_NAMES], columns=["step", *selected], rows=rows,
            steps_available=len(records), first_step=records[0]["step"] if records else None,
            last_step=records[-1]["step"] if records else None, final=final, stats=stats,
            truncated=cut > 0 or hidden_names > 0, omitted=cut, narrow_hint=hint)

    return fit_largest(build, min(inp.max_points, len(table)))


class PlotMetricsInput(BaseModel):
    """Which run and metrics to plot, and where."""

    model_config = ConfigDict(extra="forbid")
    run_id: str = RUN_ID
    names: list[str] | None = Field(default=None, description=(
        "Metric names, or the start of names ('grad' selects grad_norm), to plot: one panel per match, at most 6. "
        "Default: the reward mean, loss and entropy when logged."))
    dest: str | None = Field(default=None, description=(
        "PNG file to write ('.png'; folders are created; an existing file is replaced only if it is a PNG). Default: "
        "<state dir>/plots/<run_id>-metrics.png."))


class PlotMetricsResult(BaseModel):
    """A PNG of metrics over steps."""

    run_id: str = Field(description="Run id.")
    path: str = Field(description="Absolute path of the PNG written.")
    size_bytes: Bytes = Field(description="Size of the PNG in bytes.")
    mime_type: str = Field(default="image/png", description="Always image/png.")
    metrics: list[str] = Field(description="Metrics plotted, one panel each, in order.")
    steps: int = Field(description="Steps plotted.")
    first_step: int | None = Field(default=None, description="First step plotted.")
    last_step: int | None = Field(default=None, description="Last step plotted.")


MAX_PANELS = 6
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_target(ctx: Context, stem: str, dest: str | None, field: str = "dest") -> Path:
    """Where a PNG goes: ``dest`` (checked: ends in .png, replaces only a PNG; errors name the argument ``field``),
    else ``<state dir>/plots/<stem>.png`` (``stem`` made safe as a file name)."""
    if dest is None:
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", stem)
        return ctx.state_path().resolve() / "plots" / f"{safe}.png"
    target = ctx.resolve_path(dest)
    if target.suffix.lower() != ".png":
        raise fail("bad_arguments", f"{field} {dest!r} does not end with .png.", "Pass a file name ending in .png.")
    if target.exists():
        if not target.is_file():
            raise fail("bad_arguments", f"{field} {dest!r} exists and is not a file.", "Pass a new .png file path.")
        with target.open("rb") as handle:
            if handle.read(8) != PNG_SIGNATURE:
                raise fail("bad_arguments", f"{field} {dest!r} exists and is not a PNG; it would be overwritten.",
                           "Pass a new .png file path (existing non-PNG files are never replaced).")
    return target


def render_png(target: Path, title: str, panels: dict[str, dict[str, list[tuple[int, float]]]],
               marks: dict[str, dict[str, list[tuple[int, str]]]] | None = None) -> int:
    """Write a PNG with one panel per metric of ``panels`` (``{metric: {line label: [(step, value)]}}``; one line
    labelled ``""`` draws no legend), steps on a shared axis, each line's last value written at its end, and the
    ``marks`` of a line (``{metric: {label: [(step, text)]}}``) as hollow circles with their text; returns its size
    in bytes. Raises ImportError without matplotlib."""
    # Lazy: matplotlib is slow to import. No pyplot: an explicit Agg canvas, no global backend state.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(8.0, 1.2 + 2.0 * len(panels)), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    for ax, (name, lines) in zip(axes, panels.items(), strict=True):
        for label, points in lines.items():
            steps = [s for s, _ in points]
            values = [v for _, v in points]
            line, = ax.plot(steps, values, marker="." if len(points) < 60 else None, linewidth=1.4,
                            label=label or None)
            if points:
                ax.annotate(f"{values[-1]:.4g}", (steps[-1], values[-1]), fontsize=8, xytext=(4, 0),
                            textcoords="offset points", color=line.get_color())
            at = dict(points)
            for step, text in ((marks or {}).get(name, {}).get(label) or []):
                if step in at:
                    ax.plot([step], [at[step]], marker="o", markersize=9, fillstyle="none", color=line.get_color())
                    ax.annotate(text, (step, at[step]), fontsize=7, xytext=(0, 7), textcoords="offset points",
                                ha="center", color=line.get_color())
        ax.set_ylabel(name, fontsize=8)
        ax.grid(True, alpha=0.3)
        ax.margins(x=0.07)  # room for the last values written at the right
        if any(lines):
            ax.legend(fontsize=7, loc="best")
    axes[-1].set_xlabel("step")
    axes[-1].xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.suptitle(title, fontsize=10)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    target.parent.mkdir(parents=True, exist_ok=True)
    written, _ = write_atomic(target, [buffer.getvalue()])
    return written


@tool
def plot_metrics(inp: PlotMetricsInput, ctx: Context) -> PlotMetricsResult:
    """Render metrics over steps as a PNG (matplotlib, Agg, imported on first use).

    Data: GET ``/rft/runs/{id}/metrics`` (every step). The file appears whole or not
    at all (never a partial PNG). Errors: ``not_found``,
    ``bad_arguments`` (dest, unknown metric, nothing to plot), ``dependency_missing``
    (matplotlib not installed), the platform codes.
    """
    target = png_target(ctx, f"{inp.run_id}-metrics", inp.dest)
    with require_run_on_404(ctx, inp.run_id):
        records = records_of(ctx.platform(), inp.run_id, None, None)
    names = _metric_names(records)
    if inp.names:
        chosen = metrics_to_plot(names, inp.names)
    else:
        reward = reward_key(records)
        chosen = [n for n in (reward, "loss", "entropy") if n in names] or names[:3]
    if not chosen:
        check = call("mf_check_progress", run_id=inp.run_id)
        raise fail("bad_arguments", f"Run {inp.run_id} has no metrics yet.",
                   f"See where it is with {check}; plot once the run has finished a step.", next_calls=[check])
    series = {n: [(r["step"], float(r[n])) for r in records if is_number(r.get(n))] for n in chosen}
    numbers = call("mf_get_metrics", run_id=inp.run_id, names=chosen)
    try:
        size = render_png(target, f"run {inp.run_id}", {name: {"": points} for name, points in series.items()})

    except ImportError:
        raise fail("dependency_missing", "matplotlib is not installed, so no plot can be drawn.",
                   "Install the plot extra (`uv sync --extra plot`, or `pip install 'model-factory-skill[plot]'`), or "
                   "read the numbers "
                   f"with {numbers}.", next_calls=[numbers]) from None
    steps = sorted({s for points in series.values() for s, _ in points})
    return PlotMetricsResult(run_id=inp.run_id, path=str(target), size_bytes=size, metrics=chosen, steps=len(steps),
                             first_step=steps[0] if steps else None, last_step=steps[-1] if steps else None)


def metrics_to_plot(names: list[str], wanted: list[str]) -> list[str]:
    """The metrics of ``names`` that ``wanted`` (names or starts of names) picks, for one plot: at most
    :data:`MAX_PANELS`. Raises ToolFailure ``bad_arguments`` (field ``names``) when more match."""
    chosen = _select(names, wanted, MAX_PANELS)
    if len(chosen) > MAX_PANELS:
        raise fail("bad_arguments", f"{len(chosen)} metrics match ({', '.join(chosen[:20])}); a plot has at most "
                   f"{MAX_PANELS} panels.", "Name fewer metrics, or longer starts of names.",
                   fields=[FieldProblem(path="names", problem=f"matches more than {MAX_PANELS} metrics")])
    return chosen
