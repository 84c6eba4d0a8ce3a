"""The after-create alerts of a run (:mod:`tools.launch._verify` makes them at dispatch and resume): read
back from the state store for check-progress and run-report, with the pause and stop calls."""

from __future__ import annotations

from tools.core._context import Context
from tools.errors import Call, call
from tools.guardrails import confirmation as gate


def alert_calls(run_id: str) -> list[Call]:
    """The calls an alert offers: pause the run (a checkpoint kept) or stop it."""
    return [call("mf_pause_run", run_id=run_id), call("mf_stop_run", run_id=run_id)]


def alert_words(run_id: str, alerts: list[str]) -> str:
    """One sentence for the alerts of run ``run_id``, with the pause and stop calls."""
    pause, stop = alert_calls(run_id)
    return (f"ALERT: the platform's run {run_id} differs from the approved plan: {'; '.join(alerts)}. It bills as "
            f"the platform says. Tell the person; to hold it: {pause} (a checkpoint is kept), or end it: {stop}.")


def alerts_of_run(ctx: Context, run_id: str) -> list[str]:
    """The after-create alerts the state store recorded for run ``run_id`` (its launch or resume plan on
    this platform); empty when none, or no plan of it is here. Store only."""
    state = gate.plan_of_run(ctx.store(), run_id, platform_url=ctx.settings.base_url)
    if state is None:
        return []
    for attempt in reversed(state.attempts):
        if attempt.outcome in ("created", "reconciled") and attempt.facts is not None:
            return list(attempt.facts.alerts)
    return []
