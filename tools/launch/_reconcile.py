"""Launches whose answer was lost: finding their run again, and refusing to launch the same
config again while one is unresolved.

A create (POST ``/training/runs``) that was sent but got no usable answer may have created a
run that bills now. It is never re-sent: :func:`look_for_lost_run` lists the owner's newest
runs (GET ``/rft/runs``, :data:`RECONCILE_PAGES` pages of :data:`RECONCILE_PAGE_SIZE`) for
the plan's fingerprint (the ``-mf<8 hex>`` suffix of the run name, ``_plan.fingerprint``) and
records ``reconciled`` (found) or ``still_unknown`` (listed, not found) in the store. A resume
(POST ``/training/runs/{id}/resume``) whose answer was lost is found the same way, by the paused
run's name on a new run (:func:`matches_plan`).

The same launch must not happen twice by another road either: re-planning the same config.
:func:`check_unresolved` runs whenever a launch plan is computed (planning, dispatch's
rebuild): while the store holds an unresolved launch (status ``ambiguous`` or ``in_flight``,
:func:`tools.guardrails.confirmation.unresolved_launches`) of the same owner and the same
config file bytes, it first tries to reconcile it, and if it stays unresolved refuses with
``unresolved_launch`` naming the earlier plan and how to reconcile. Whatever the other plan
arguments: a new step cap or GPU type does not make a second run less of a second run.

The way out for a person who knows better (the earlier run was checked by hand and does not
exist, or a second run is wanted): the plan argument ``acknowledge_unresolved`` names the
unresolved plan ids. The plan material records them (``acknowledged_unresolved``), the summary a
person approves shows each one (:func:`unresolved_lines`), a budget policy never approves such a
plan (:class:`tools.guardrails.policy.PlanFacts` ``unresolved_launches``), so only a human
channel (terminal, MCP elicitation, host approver) can.

Sources: reference/prime-api.md §2.1 rows 2 (create) and 8 (list runs: ``page``, ``limit``,
``total``); the run name is ours (``_plan``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from tools.core import Context, owner_label
from tools.errors import ToolFailure, call, fail
from tools.guardrails import confirmation as gate
from tools.guardrails.records import PlanRecord
from tools.guardrails.store import Store
from tools.platform import errors as perr
from tools.platform import wire

#: Created runs are looked for among this many of the owner's newest runs (2 pages).
RECONCILE_PAGES, RECONCILE_PAGE_SIZE = 2, 50
#: A run found by fingerprint must be created no earlier than the attempt minus this skew.
CLOCK_SKEW = timedelta(minutes=15)


@dataclass(frozen=True)
class Lookup:
    """What :func:`look_for_lost_run` found for one plan.

    ``run``: the earliest run carrying the plan's fingerprint (``None``: not found, or the runs
    could not be listed); ``matches``: every such run id; ``problem``: why the runs could not be
    listed (then nothing was recorded); ``doubtful``: they were listed, but a row that cannot be read may
    be the run (:class:`DoubtfulRows`); ``state``: the plan's state after the lookup."""

    state: gate.LaunchState
    run: wire.RLRun | None = None
    matches: list[str] = field(default_factory=list)
    problem: str | None = None
    doubtful: bool = False

    @property
    def fingerprint(self) -> str:
        """The plan's run-name suffix (``mf`` + 8 hex); empty for a resume plan."""
        return self.state.plan.fingerprint or ""

    @property
    def looks_for(self) -> str:
        """The run being looked for, in words (:func:`matches_plan`)."""
        plan = self.state.plan
        if plan.action == "resume":
            name = f" named {plan.name}" if plan.name else f" of {plan.model or 'the same model'}"
            return f"new run{name} (other than {plan.run_id}) created since the resume was sent"
        return f"run whose name ends in -{self.fingerprint}"


def matches_plan(plan: PlanRecord, run: wire.RLRun) -> bool:
    """Whether ``run`` may be the one a lost create of ``plan`` made: for a launch, its name carries
    the plan's fingerprint; for a resume (POST /training/runs/{id}/resume answers like a create with a
    NEW run, which keeps the paused run's name on the platform as far as is known), another run
    with the paused run's name (or, unnamed, the same base model)."""
    if plan.action == "resume":
        if run.id == plan.run_id or run.id in plan.already_resumed_as:
            return False  # the paused run, or an earlier resume the person saw and approved this one over
        return run.name == plan.name if plan.name else run.base_model == plan.model
    fp = plan.fingerprint or ""
    return bool(fp) and fp in (run.name or "")


class DoubtfulRows(perr.InvalidRequest):
    """The runs were listed, but a row that cannot be read may be the run looked for."""


def _may_match(plan: PlanRecord, name: str) -> bool:
    """Whether a run named ``name`` may be the plan's (:func:`matches_plan` on the name alone)."""
    if plan.action == "resume":
        return not plan.name or name == plan.name
    fp = plan.fingerprint or ""
    return bool(fp) and fp in name


def _matching_runs(ctx: Context, plan: PlanRecord, since: datetime) -> list[wire.RLRun]:
    """The owner's newest runs (GET /rft/runs, :data:`RECONCILE_PAGES` pages) that :func:`matches_plan`
    and were created no earlier than ``since``, earliest first. Raises PlatformError, also when a row that
    cannot be read (:attr:`~tools.platform.wire.RLRunPage.unreadable`) may be the run looked for."""
    found: list[wire.RLRun] = []
    for page in range(1, RECONCILE_PAGES + 1):
        listed = ctx.platform().list_runs(team_id=plan.team_id, page=page, limit=RECONCILE_PAGE_SIZE)
        if doubtful := [u for u in listed.unreadable if u.name is None or _may_match(plan, u.name)]:
            raise DoubtfulRows(  # the run looked for may be the row that cannot be read: never guess
                f"GET /rft/runs answered {len(doubtful)} run row(s) that cannot be read and may be this plan's run "
                f"({doubtful[0].words('row')})", endpoint="GET /rft/runs")
        found += [r for r in listed.runs if matches_plan(plan, r)
                  and (r.created_at is None or r.created_at.tzinfo is None or r.created_at >= since)]
        if len(listed.runs) < RECONCILE_PAGE_SIZE or listed.total is None:
            break
    found.sort(key=lambda r: (r.created_at is None, r.created_at))
    return found


def look_before_create(ctx: Context, store: Store, state: gate.LaunchState, attempt_id: str) -> Lookup:
    """Before a create is sent (the plan just claimed as ``attempt_id``): is a run of this plan on the
    platform already? The store may not know: a copy of it was dispatched too, or an earlier version's
    ledger in another folder sent it. Looks for a run
    :func:`matches_plan` created since the plan was recorded (minus :data:`CLOCK_SKEW`) among the
    owner's newest runs. Found: records ``reconciled`` on ``attempt_id`` (nothing is sent) and
    returns the run. Not found: records nothing (the caller sends). The runs cannot be listed:
    ``problem`` says why, nothing recorded; the caller decides (a row that may be the run: :func:`doubtful_failure`)."""
    planned = datetime.fromisoformat(str(state.planned_at)) if state.planned_at else None
    since = (planned or datetime.fromisoformat(state.attempts[-1].started_at)) - CLOCK_SKEW
    try:
        found = _matching_runs(ctx, state.plan, since)
    except perr.PlatformError as exc:
        return Lookup(state=state, problem=exc.message, doubtful=isinstance(exc, DoubtfulRows))
    if not found:
        return Lookup(state=state)
    gate.record_outcome(store, state.plan_id, attempt_id, "reconciled", run_id=found[0].id,
                        matches=[r.id for r in found], found_before_sending=True)
    return Lookup(state=gate.launch_state(store, state.plan_id), run=found[0], matches=[r.id for r in found])


def doubtful_failure(state: gate.LaunchState, problem: str) -> ToolFailure:
    """``unresolved_launch`` (retryable) when the runs listed before a create hold a row that cannot be
    read and may be this plan's run (a copy of the state folder may have launched it): nothing was sent,
    the approval is not used up."""
    again = call("mf_dispatch_run", plan_id=state.plan_id)
    runs = call("mf_list_runs", team=state.plan.team_id or "personal")
    what = f"a {Lookup(state=state).looks_for}"
    return fail("unresolved_launch", f"Plan {state.plan_id} was not sent: {problem}. Sending it could start a second "
                "run.", f"Call {again} again once the platform lists its runs readably (the same confirmation works; "
                f"it checks the runs first), or look for {what} with {runs} or in the dashboard.", retryable=True,
                next_calls=[again, runs])


def look_for_lost_run(ctx: Context, store: Store, state: gate.LaunchState) -> Lookup:
    """Look for the run of a plan whose attempt's outcome is unknown (ambiguous, still unknown or
    in flight); never re-send. Records ``reconciled`` (with ``run_id`` and ``matches``) or
    ``still_unknown`` on the plan's latest open attempt; records nothing when GET ``/rft/runs``
    fails (``problem`` says why). A run counts when :func:`matches_plan` (launch: the name carries
    the plan's fingerprint; resume: a new run of the paused run's name) and it was created no
    earlier than the first open attempt minus :data:`CLOCK_SKEW`."""
    open_attempts = [a for a in state.attempts if a.outcome in (None, "ambiguous", "still_unknown")]
    if not open_attempts:
        return Lookup(state=state, problem="the store holds no open attempt for this plan")
    since = min(datetime.fromisoformat(a.started_at) for a in open_attempts) - CLOCK_SKEW
    try:
        found = _matching_runs(ctx, state.plan, since)
    except perr.PlatformError as exc:
        return Lookup(state=state, problem=exc.message)
    last = open_attempts[-1].attempt_id
    if not found:
        gate.record_outcome(store, state.plan_id, last, "still_unknown")
        return Lookup(state=gate.launch_state(store, state.plan_id))
    gate.record_outcome(store, state.plan_id, last, "reconciled", run_id=found[0].id, matches=[r.id for r in found])
    return Lookup(state=gate.launch_state(store, state.plan_id), run=found[0], matches=[r.id for r in found])


def look_for_lost_action(ctx: Context, store: Store, state: gate.LaunchState) -> Lookup:
    """A stop, pause or restart whose answer was lost (or never recorded): what the run shows now
    (GET ``/rft/runs/{id}``). A stop took effect when the run is terminal; a pause when it is
    PAUSING, PAUSED or terminal. Nothing a run shows says a restart happened (a restarted run is
    RUNNING, as it was), so a lost restart stays unresolved: the next restart plan of that run names
    it and a person decides. Records ``reconciled`` (with the evidence) or ``still_unknown`` on the
    latest open attempt; nothing when the run cannot be read (``problem``)."""
    open_attempts = [a for a in state.attempts if a.outcome in (None, "ambiguous", "still_unknown")]
    if not open_attempts:
        return Lookup(state=state, problem="the store holds no open attempt for this plan")
    try:
        run = ctx.platform().get_run(str(state.plan.run_id))
    except perr.PlatformError as exc:
        return Lookup(state=state, problem=exc.message)
    status, action = wire.RunStatus.of(run.status), state.plan.action
    took = wire.RunStatus.is_terminal(status) if action == "stop" else \
        (status in ("PAUSING", "PAUSED") or wire.RunStatus.is_terminal(status)) if action == "pause" else False
    last = open_attempts[-1].attempt_id
    if not took:
        gate.record_outcome(store, state.plan_id, last, "still_unknown")
        return Lookup(state=gate.launch_state(store, state.plan_id))
    gate.record_outcome(store, state.plan_id, last, "reconciled", run_id=run.id, evidence=f"the run is {run.status}")
    return Lookup(state=gate.launch_state(store, state.plan_id), run=run, matches=[run.id])


def unresolved_action_lines(lookups: list[Lookup]) -> list[str]:
    """Summary lines for a stop, pause or restart plan of a run with earlier such requests whose answer
    was lost (shown first): a person decides whether to send another."""
    lines = []
    for lookup in lookups:
        plan, sent = lookup.state.plan, next((a.started_at for a in lookup.state.attempts), None)
        why = f"the run could not be read to check ({lookup.problem})" if lookup.problem else \
            "nothing the run shows says whether it took effect"
        lines.append(f"  UNRESOLVED:    {plan.action} plan {plan.plan_id} was sent"
                     f"{f' at {sent}' if sent else ''} and its answer was lost: it may have been carried out "
                     f"({why}). Approving this sends ANOTHER {plan.action}.")
    return lines


def parse_plan_ids(text: str | None) -> list[str]:
    """``"plan_a, plan_b"`` -> ``["plan_a", "plan_b"]`` (sorted, no duplicates, blanks dropped)."""
    return sorted({part.strip() for part in (text or "").split(",") if part.strip()})


def _describe(lookup: Lookup) -> str:
    plan = lookup.state.plan
    sent = next((a.started_at for a in lookup.state.attempts), None)
    why = f"it could not be checked ({lookup.problem})" if lookup.problem else \
        "no run carrying its fingerprint is listed yet"
    return (f"plan {lookup.state.plan_id} ({plan.config_path or 'same config'}, "
            f"{owner_label(plan.team_id)}) was sent{f' at {sent}' if sent else ''} and its answer was "
            f"lost; it may have created run {plan.name or '*-' + lookup.fingerprint}: {why}")


def unresolved_failure(lookups: list[Lookup], *, planning: bool, config_path: str | None = None) -> ToolFailure:
    """``unresolved_launch`` naming each earlier plan, why it is unresolved, and how to
    reconcile (retryable: the same call succeeds once the earlier launch is found or known
    absent). ``planning``: said from mf_plan_run (else from dispatch or approval)."""
    first = lookups[0].state.plan_id
    what = "it is not planned again" if planning else "this plan is not launched"
    config = f" of {config_path}" if config_path else " of this config file"
    message = (f"An earlier launch{config} for the same owner is unresolved, so {what}: "
               + "; ".join(_describe(lookup) for lookup in lookups)
               + ". Another launch could start a second billed run.")
    owner = lookups[0].state.plan.team_id or "personal"
    ids = ",".join(lookup.state.plan_id for lookup in lookups)
    dispatch, runs = call("mf_dispatch_run", plan_id=first), call("mf_list_runs", team=owner)
    calls = [dispatch, runs]
    fix = (f"Reconcile first: {dispatch} (it only looks for the run, never re-sends), or look for a run whose name "
           f"ends in -{lookups[0].fingerprint} with {runs} or in the dashboard; then plan again")
    if config_path:
        again = call("mf_plan_run", config_path=config_path, team=owner)
        anyway = call("mf_plan_run", config_path=config_path, team=owner, acknowledge_unresolved=ids)
        calls += [again, anyway]
        fix += (f" with the same arguments (e.g. {again}). Only if the user has checked and still wants another "
                f"run: {anyway}, and a person approves it (a budget policy never does).")
    else:
        fix += (f" with the same arguments. Only if the user has checked and still wants another run: plan with "
                f"acknowledge_unresolved set to {ids}, and a person approves it (a budget policy never does).")
    return fail("unresolved_launch", message, fix, retryable=True, next_calls=calls)


def check_unresolved(ctx: Context, store: Store, *, plan_id: str, team_id: str | None, account_id: str | None,
                     file_sha256: str, acknowledged: list[str], config_path: str, planning: bool) -> list[Lookup]:
    """The unresolved launches a launch plan must acknowledge: every earlier plan of the same
    owner (the team ``team_id``, or the personal account of ``account_id``) on this platform and
    the same config file bytes still unresolved after one reconciliation attempt each
    (:func:`look_for_lost_run`). Returns them when ``acknowledged`` names them all (the plan's
    summary must show them: :func:`unresolved_lines`).

    Raises ToolFailure ``unresolved_launch`` (:func:`unresolved_failure`) when one is not
    acknowledged; ``bad_arguments`` when ``planning`` and ``acknowledged`` names a plan that is
    not an unresolved launch of this config and owner."""
    earlier = gate.unresolved_launches(store, platform_url=ctx.settings.base_url, team_id=team_id,
                                       account_id=account_id, file_sha256=file_sha256, exclude=plan_id)
    if planning:
        unknown = sorted(set(acknowledged) - {s.plan_id for s in earlier})
        if unknown:
            listed = ", ".join(s.plan_id for s in earlier) or "none"
            raise fail("bad_arguments", f"acknowledge_unresolved names {', '.join(unknown)}, which is not an "
                       f"unresolved launch of this config file for the {owner_label(team_id)} (unresolved now: "
                       f"{listed}).", "Pass only plan ids the unresolved_launch error named, or nothing.")
    still = [lookup for lookup in (look_for_lost_run(ctx, store, s) for s in earlier) if lookup.run is None]
    missing = [lookup for lookup in still if lookup.state.plan_id not in acknowledged]
    if missing:
        raise unresolved_failure(missing, planning=planning, config_path=config_path)
    return still


def unresolved_lines(lookups: list[Lookup]) -> list[str]:
    """Summary lines for a plan that launches again over unresolved launches (shown first)."""
    return [f"  UNRESOLVED:    {_describe(lookup)}. Approving this plan starts ANOTHER run of the same config; "
            "a budget policy never approves it." for lookup in lookups]
