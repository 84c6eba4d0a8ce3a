"""``mf_compare_runs``: two to eight runs side by side: which learned, how fast, at what pace and cost, what
differs in their configs, and one PNG of their curves aligned by step (:func:`compare_runs`).

Sources, per run: GET ``/rft/runs/{id}`` (status, mode, ``runConfig``: the config as the platform holds it),
``/metrics`` (every step: the learning verdict of :func:`~tools.monitor._learning.judge` over the whole run,
the milestones of :func:`~tools.monitor._learning.milestones`, steps per hour from the records' timestamps),
and the spend (:func:`~tools.monitor.spend.spend_so_far`: the platform's usage figure, and the plan's
expected cost when this state folder holds the plan).

Decisions where the platform is silent:

- The metric a run optimises is its reward (higher is better); an SFT run's is its loss (lower is better).
  Runs of different kinds are each judged on their own metric; milestones are compared only between runs
  of one kind, and the result says what is not compared.
- Steps to 50% / 90% of the change: from the run's first step until its curve, smoothed over
  :data:`~tools.monitor._learning.SMOOTH_POINTS` steps, first covers that share of the change between its
  smoothed first and last values; none when the curve did not change beyond its noise (a flat trend).
- Config differences are the key paths of ``runConfig`` whose values differ (a missing key differs from
  any value), at most :data:`MAX_DIFF_PATHS`, each value as compact JSON clipped to
  :data:`MAX_VALUE_CHARS` characters.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from tools.core import Context, require_run, tool
from tools.errors import Call, FieldProblem, call, fail
from tools.monitor._learning import LearningVerdict, judge, milestones
from tools.monitor._series import metric_key, numeric_keys, points, step_seconds
from tools.monitor.metrics import _metric_names, metrics_to_plot, png_target, records_of, render_png
from tools.monitor.spend import spend_so_far
from tools.platform import errors as perr
from tools.platform import wire
from tools.units import USD, usd

#: Config paths that differ, listed at most (the rest are counted).
MAX_DIFF_PATHS = 30
#: Characters of one config value shown.
MAX_VALUE_CHARS = 60

_RUN_ID = Annotated[str, Field(min_length=1, max_length=200)]


class CompareRunsInput(BaseModel):
    """Which runs, which metrics to plot, and where."""

    model_config = ConfigDict(extra="forbid")
    run_ids: list[_RUN_ID] = Field(min_length=2, max_length=8, description="2 to 8 run ids, each once.")
    names: list[str] | None = Field(default=None, description=(
        "Metrics to plot (or starts of names). Default: the metric each run optimises."))
    plot_path: str | None = Field(default=None, description=(
        "PNG file to write. Default: <state dir>/plots/compare-<run ids>.png."))


class RunSide(BaseModel):
    """One run of the comparison."""

    run_id: str = Field(description="Run id.")
    name: str | None = Field(default=None, description="Run name.")
    mode: str = Field(description="rl or sft.")
    status: str = Field(description="Wire status.")
    verdict: LearningVerdict | None = Field(default=None, description="Learning verdict over the whole run.")
    metric: str | None = Field(default=None, description="The metric it optimises (reward; SFT: loss).")
    first: float | None = Field(default=None, description="Its value at the first step.")
    first_step: int | None = Field(default=None, description="Its first step (a resumed run's is later than 1).")
    best: float | None = Field(default=None, description="Its best value (highest reward, lowest loss).")
    best_step: int | None = Field(default=None, description="Step of the best value.")
    last: float | None = Field(default=None, description="Its last value.")
    last_step: int | None = Field(default=None, description="Last step logged.")
    steps_to_50: int | None = Field(default=None, description="Steps until 50% of its change (null: no change).")
    steps_to_90: int | None = Field(default=None, description="Steps until 90% of its change.")
    steps_per_hour: float | None = Field(default=None, description="Training pace (median step time).")
    platform_usd: USD | None = Field(default=None, description="The platform's usage figure so far.")
    plan_expected_usd: USD | None = Field(default=None, description=(
        "The plan's expected cost (null: no plan for it in this state folder)."))
    problems: list[str] | None = Field(default=None, description="Findings to act on (mf_check_progress has them).")


class ConfigDifference(BaseModel):
    """A config key path whose value differs between the runs."""

    path: str = Field(description="Key path, e.g. trainer.optim.lr.")
    values: list[str | None] = Field(description="Its value in each run, in run_ids order (null: not set).")


class CompareRunsResult(BaseModel):
    """Runs side by side."""

    summary: str = Field(description="Who learned faster and what each cost, in one or two sentences.")
    runs: list[RunSide] = Field(description="One per run, in run_ids order.")
    config_differences: list[ConfigDifference] = Field(description="runConfig paths whose values differ.")
    config_same_paths: int = Field(description="runConfig paths equal in every run.")
    not_compared: str | None = Field(default=None, description="What the runs do not share (RL vs SFT).")
    plot_path: str | None = Field(default=None, description=(
        "The PNG (null: no run has metrics yet, or the plot extra is not installed)."))
    plotted: list[str] = Field(default_factory=list, description="Metrics plotted, one panel each.")
    truncated: bool = Field(default=False, description="True when config differences were left out.")
    omitted: int = Field(default=0, description="Config differences left out.")
    narrow_hint: str | None = Field(default=None, description="How to see the differences left out, when truncated.")
    next_step: str = Field(description="What to do next.")
    next_calls: list[Call] = Field(default_factory=list, description="The tool calls next_step names.")


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a.b": leaf}`` of nested tables (lists are leaves)."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flat(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value} if prefix else {}


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), default=str)
    return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS - 3] + "..."


_MISSING = object()


def _differences(configs: list[dict[str, Any] | None]) -> tuple[list[ConfigDifference], int]:
    flats = [_flat(c or {}) for c in configs]
    paths = sorted(set().union(*flats))
    differ, same = [], 0
    for path in paths:
        values = [f.get(path, _MISSING) for f in flats]
        if all(v == values[0] for v in values):
            same += 1
        else:
            differ.append(ConfigDifference(path=path, values=[None if v is _MISSING else _text(v) for v in values]))
    return differ, same


def _side(ctx: Context, run_id: str) -> tuple[RunSide, list[dict], dict[str, Any] | None]:
    run = require_run(ctx, run_id)
    sft = run.is_sft
    side = RunSide(run_id=run.id, name=run.name, mode="sft" if sft else "rl", status=run.status)
    try:
        records = records_of(ctx.platform(), run.id, None, None)
    except perr.NotFound:
        records = []
    if records:
        learning = judge(records, sft=sft)
        side.verdict, side.metric = learning.verdict, learning.metric
        side.problems = [f.signal for f in learning.findings if not f.ok] or None
        key = learning.metric or metric_key("loss" if sft else "reward", numeric_keys(records))
        pts = points(records, key) if key else []
        marks = milestones(key, pts, higher_is_better=not sft) if key else None
        if marks:
            side.first, side.first_step, side.best, side.best_step = pts[0][1], pts[0][0], marks.best, marks.best_step
            side.last, side.last_step = marks.last, marks.last_step
            side.steps_to_50, side.steps_to_90 = marks.steps_to_50, marks.steps_to_90
        pace = step_seconds(records)
        side.steps_per_hour = round(3600 / pace, 1) if pace else None
    if run.started_at is not None:
        spend = spend_so_far(ctx, run)
        side.platform_usd, side.plan_expected_usd = spend.platform_usd, spend.plan_expected_usd
    return side, records, run.run_config


def _summary(sides: list[RunSide], differences: list[ConfigDifference]) -> str:
    """Who learned faster (per kind), what differs in their configs, and what each cost."""
    sentences = []
    for mode in ("rl", "sft"):
        group = [s for s in sides if s.mode == mode and s.metric]
        if len(group) < 2:
            continue
        fast = [s for s in group if s.steps_to_50 is not None]
        better = max if mode == "rl" else min
        ends = better(group, key=lambda s: s.last if s.last is not None else (-1e300 if mode == "rl" else 1e300))
        text = ""
        if ends.last is not None:
            level = [s for s in group if s.last is not None and f"{s.last:.4g}" == f"{ends.last:.4g}"]
            who = f"{' and '.join(s.run_id for s in level)} end level" if len(level) > 1 else f"{ends.run_id} ends best"
            text = f"{who} ({ends.metric} {ends.last:.4g})"
        if fast:
            def pace(s: RunSide) -> tuple[float, float]:
                return (s.steps_to_50 or 0, s.steps_to_90 if s.steps_to_90 is not None else 1e9)
            quick = min(fast, key=pace)
            tied = [s for s in fast if pace(s) == pace(quick)]
            others = ", ".join(f"{s.run_id} {s.steps_to_50 if s.steps_to_50 is not None else 'never'}"
                               for s in group if s not in tied)
            who = (f"{' and '.join(s.run_id for s in tied)} learned equally fast: 50% of their change in "
                   if len(tied) > 1 else f"{quick.run_id} learned fastest: 50% of its change in ")
            text += ("; " if text else "") + who + f"{quick.steps_to_50} steps" + (f" ({others})" if others else "")
        else:
            text += ("; " if text else "") + "none of them changed beyond the noise"
        sentences.append(text)
    if differences:
        paths = ", ".join(d.path for d in differences[:3]) + (", ..." if len(differences) > 3 else "")
        sentences.append(f"Their configs differ in {len(differences)} key path(s): {paths}")
    costs = ", ".join(f"{s.run_id} {usd(s.platform_usd)}" + (f" (plan {usd(s.plan_expected_usd)})"
                                                                  if s.plan_expected_usd is not None else "")
                      for s in sides)
    going = any(not wire.RunStatus.is_terminal(s.status) for s in sides)
    sentences.append(f"Cost (the platform's usage figure{', so far for a run still going' if going else ''}): "
                     f"{costs}")
    return ". ".join(sentences) + "."


def _plot(ctx: Context, inp: CompareRunsInput, sides: list[RunSide],
          records: list[list[dict]]) -> tuple[str | None, list[str]]:
    names = sorted({n for rs in records for n in _metric_names(rs)})
    if inp.names:
        chosen = metrics_to_plot(names, inp.names)
    else:
        chosen = list(dict.fromkeys(s.metric for s in sides if s.metric))
    def label(s: RunSide) -> str:
        return s.run_id + (f" ({s.name})" if s.name else "")

    panels = {name: {label(s): points(rs, name) for s, rs in zip(sides, records, strict=True) if points(rs, name)}
              for name in chosen}
    panels = {name: lines for name, lines in panels.items() if lines}
    if not panels:
        return None, []
    marks: dict[str, dict[str, list[tuple[int, str]]]] = {}
    for s in sides:
        if s.metric and s.first_step is not None:
            marks.setdefault(s.metric, {})[label(s)] = [(s.first_step + n, f"{share}%") for n, share in
                                                        ((s.steps_to_50, 50), (s.steps_to_90, 90)) if n is not None]
    target = png_target(ctx, "compare-" + "-".join(s.run_id[:12] for s in sides), inp.plot_path, "plot_path")
    try:
        render_png(target, "runs by step (circles: 50% and 90% of each run's change)", panels, marks)
    except ImportError:
        if inp.plot_path is None:  # the comparison stands without its picture
            return None, []
        raise fail("dependency_missing", "matplotlib is not installed, so no plot can be drawn.",
                   "Install the plot extra (`uv sync --extra plot`, or `pip install 'model-factory-skill[plot]'`), "
                   "or compare without a plot path.") from None
    return str(target), list(panels)


@tool
def compare_runs(inp: CompareRunsInput, ctx: Context) -> CompareRunsResult:
    """Compare 2-8 runs (module doc): learning verdicts and milestones of the metric each optimises, pace,
    cost, config differences by key path, and one PNG aligned by step. Errors: ``bad_arguments`` (a run given
    twice, plot_path, names), ``not_found`` (a run), ``dependency_missing`` (a plot_path given without the plot extra's
    matplotlib; without a plot_path the comparison comes without its PNG), the platform codes."""
    repeated = sorted({r for r in inp.run_ids if inp.run_ids.count(r) > 1})
    if repeated:
        raise fail("bad_arguments", f"Run {', '.join(repeated)} is given more than once.", "Give each run once.",
                   fields=[FieldProblem(path="run_ids", problem="a run is given more than once")])
    if inp.plot_path is not None:
        png_target(ctx, "compare", inp.plot_path, "plot_path")  # refuse a bad path before any read
    read = [_side(ctx, run_id) for run_id in inp.run_ids]
    sides, records, configs = [r[0] for r in read], [r[1] for r in read], [r[2] for r in read]
    differences, same = _differences(configs)
    kinds = {s.mode for s in sides}
    not_compared = None
    if kinds == {"rl", "sft"}:
        sft = ", ".join(s.run_id for s in sides if s.mode == "sft")
        not_compared = (f"{sft} {'is' if ',' not in sft else 'are'} SFT (a loss, no reward, no rollouts), the "
                        "others RL: each is judged on its own metric, milestones only against runs of its kind, "
                        "and the plot has a panel per metric.")
    plot_path, plotted = _plot(ctx, inp, sides, records)
    worst = next((s for s in sides if s.problems), None)
    if worst is not None:
        nxt = call("mf_check_progress", run_id=worst.run_id)
        step = f"{worst.run_id} has findings to act on ({', '.join(worst.problems or [])}): {nxt} says what to do."
    else:
        nxt = call("mf_run_report", run_id=sides[0].run_id)
        step = f"Each run's own report: {nxt} (and the same for the others)."
    shown = differences[:MAX_DIFF_PATHS]
    return CompareRunsResult(
        summary=_summary(sides, differences), runs=sides, config_differences=shown, config_same_paths=same,
        not_compared=not_compared, plot_path=plot_path, plotted=plotted,
        truncated=len(differences) > len(shown), omitted=len(differences) - len(shown), next_step=step,
        narrow_hint="Compare two runs at a time, or read each run's config with mf_get_run."
        if len(differences) > len(shown) else None,
        next_calls=[nxt])
