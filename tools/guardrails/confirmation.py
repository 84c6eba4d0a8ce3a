"""The confirmation gate: a launch needs a human's approval of *this exact plan*, once.

Flow for the launch tools (all state lives in the :class:`~tools.guardrails.store.Store`)::

    h = plan_hash(material)                              # plan_run
    record_plan(store, PlanRecord.of(plan_id, h, material, planned_at=..., **facts))
    token = mint(store, plan_id, h, "terminal")          # a human channel, never the model
    ...
    claim = claim_dispatch(store, plan_id, plan_hash(material_now), token)   # dispatch_run
    try: run = client.create_run(...)                     # the one HTTP create, never retried
    except <nothing was sent>:  record_outcome(store, plan_id, claim.attempt_id, "not_sent")
    except <4xx answer>:        record_outcome(..., "rejected", status_code=...)
    except <sent, no answer>:   record_outcome(..., "ambiguous")      # then reconcile:
    else:                       record_outcome(..., "created", run_id=run.id, ...)
    # reconciliation later records "reconciled" (run_id found) or "still_unknown".

Records (:mod:`tools.guardrails.records`): the plan (its hashed material and the facts shown), each
approval (``token_sha256``, never the token; the channel and what it checked), each attempt and its
outcomes, and for a run a plan made, a run link (a resume's names the paused run it continues).

Rules enforced by :func:`claim_dispatch`, in one transaction of the store:

* A plan that has a *sent* attempt (outcome ``created``, ``reconciled``, ``ambiguous``,
  ``still_unknown``, or no outcome yet: in flight or crashed) is never dispatched again:
  ``already_dispatched`` (with the run id) or ``ambiguous_launch`` (reconcile, never re-send).
  This check comes first: whatever token is presented, the answer is the same.
* A plan imported from an old ledger is never approved or sent (``unknown_plan``: plan again).
* The token must be one minted for this plan (``confirmation_invalid`` otherwise, without
  saying which token would be right), approve the plan hash as it is *now*
  (``plan_changed``), be unexpired (``confirmation_expired``) and unused
  (``confirmation_used``).
* A token is consumed by an attempt unless that attempt's outcome is ``not_sent`` (nothing
  left the machine, e.g. the network was down): "try again" then works without a new
  approval. After ``rejected`` (the platform answered 4xx) the plan may be dispatched again,
  but only with a new approval: a person should look at why it was refused.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Literal

from pydantic import BaseModel, Field

from tools.errors import call, fail
from tools.guardrails.records import (
    ApprovalRecord,
    AttemptRecord,
    OutcomeFacts,
    OutcomeRecord,
    PlanRecord,
    RunLink,
    iso,
    utc_now,
)
from tools.guardrails.store import Store

CHANNELS = ("host_callback", "mcp_elicitation", "mcp_app", "terminal", "policy")
#: What each channel checked, as its approvals record it: never more than the channel can know.
CHECKED = {
    "terminal": "terminal, same user",
    "mcp_elicitation": "MCP elicitation form answered in the host",
    "mcp_app": "Approve clicked in the host's MCP Apps view of this plan (its single-use nonce; the button's tool is "
               "app-only, hidden from the model by a host that honours MCP Apps)",
    "host_callback": "the host's approval callback answered yes",
    "policy": "the budget policy file",
}
#: Outcomes after which the create may have reached the platform: the plan is spent.
SENT_OUTCOMES = frozenset({"created", "reconciled", "ambiguous", "still_unknown"})
#: Launch states whose create may have reached the platform with an outcome nobody knows yet: an
#: attempt whose answer was lost (``ambiguous``, ``still_unknown``) or that never recorded one
#: (``in_flight``: running now, or its process died). See :func:`unresolved_launches`.
UNRESOLVED_STATUSES = frozenset({"ambiguous", "in_flight"})
#: Outcomes after which the plan may be dispatched again (``rejected`` needs a new approval).
RETRYABLE_OUTCOMES = frozenset({"not_sent", "rejected"})
OUTCOMES = SENT_OUTCOMES | RETRYABLE_OUTCOMES
#: The plans that act on an existing run (only a person approves them).
CONTROL_ACTIONS = ("stop", "pause", "restart")

#: Keys :func:`plan_hash` requires in ``material`` (``None`` is allowed for "default/unknown").
PLAN_MATERIAL_KEYS = (
    "config_sha256", "team_id", "gpu_type", "gpu_count", "volume", "source_ref", "image_tag",
    "secret_names", "max_steps", "cost",
)
MAX_TTL_SECONDS = 24 * 3600


# --------------------------------------------------------------------------------------
# Hashing
# --------------------------------------------------------------------------------------


def canonical_json(obj: Any) -> bytes:
    """UTF-8 JSON with sorted keys and no whitespace; NaN/Infinity refused (ValueError).
    Non-JSON values (TOML dates) are written as ``str(value)``."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False, default=str).encode("utf-8")


def config_sha256(config: Mapping[str, Any]) -> str:
    """Hex sha256 of the canonical JSON of a parsed config (the hosted config table), so
    comments and formatting do not matter but every value does."""
    return hashlib.sha256(canonical_json(config)).hexdigest()


def plan_hash(material: Mapping[str, Any]) -> str:
    """``"sha256:<hex>"`` of the canonical JSON of ``material``.

    ``material`` must hold every key of :data:`PLAN_MATERIAL_KEYS` (value ``None`` when
    the platform default applies or the value is unknown):

    ``config_sha256`` (:func:`config_sha256` of the hosted config), ``team_id`` (the owner:
    team id, ``None`` for the personal account), ``gpu_type``, ``gpu_count`` (int),
    ``volume``, ``source_ref``, ``image_tag``, ``secret_names`` (names forwarded, never
    values; order does not matter), ``max_steps`` (the step cap), ``cost`` (the estimate
    shown to the human, e.g. ``{"usd_low":.., "usd_expected":.., "usd_high":..,
    "usd_per_gpu_hour":..}``). Extra keys (``mode``, ``name``, ``resume_from``) are hashed too.

    Raises ValueError when a required key is missing: a fact silently absent from the hash
    would let it change after approval.
    """
    missing = [k for k in PLAN_MATERIAL_KEYS if k not in material]
    if missing:
        raise ValueError(f"plan material lacks {', '.join(missing)}")
    data = dict(material)
    data["secret_names"] = sorted(set(data["secret_names"] or []))
    return "sha256:" + hashlib.sha256(canonical_json(data)).hexdigest()


def material_changes(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """The facts of the ``current`` plan material that differ from ``recorded`` (a plan record,
    which holds the material its hash was made from): ``(name, recorded value, current value)``
    in ``current``'s key order. The ``cost`` table is compared entry by entry (names
    ``usd_per_gpu_hour``, ``usd_low``, ``usd_expected``, ``usd_high``), ``secret_names`` as a
    set. Values are compared as canonical JSON, as :func:`plan_hash` sees them."""
    def same(a: Any, b: Any) -> bool:
        return canonical_json(a) == canonical_json(b)

    changes: list[tuple[str, Any, Any]] = []
    for key, now in current.items():
        before = recorded.get(key)
        if isinstance(now, Mapping) or isinstance(before, Mapping):
            old_table = before if isinstance(before, Mapping) else {}
            new_table = now if isinstance(now, Mapping) else {}
            changes += [(sub, old_table.get(sub), new_table.get(sub)) for sub in dict.fromkeys([*new_table, *old_table])
                        if not same(old_table.get(sub), new_table.get(sub))]
        elif key == "secret_names":
            old_names, new_names = sorted(set(before or [])), sorted(set(now or []))
            if old_names != new_names:
                changes.append((key, old_names, new_names))
        elif not same(before, now):
            changes.append((key, before, now))
    return changes


def _aware(now: datetime | None) -> datetime:
    """``now`` (default: the current time) as an aware datetime; naive values are UTC."""
    if now is None:
        return utc_now()
    return now if now.tzinfo is not None else now.replace(tzinfo=timezone.utc)


def _token_sha256(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------------------
# Folded view of the store
# --------------------------------------------------------------------------------------


class ApprovalView(BaseModel):
    """One approval of a plan (the token itself is never stored)."""

    approval_id: str = Field(description="First 12 hex digits of sha256(token); identifies the approval.")
    channel: str = Field(description="host_callback | mcp_elicitation | mcp_app | terminal | policy.")
    checked: str = Field(default="", description="What that channel checked, e.g. 'terminal, same user'.")
    owner: str | None = Field(default=None, description="Owner the approval was given for (team id or 'personal').")
    plan_hash: str = Field(description="The plan hash that was approved.")
    minted_at: str = Field(description="ISO 8601 time of approval.")
    expires_at: str = Field(description="ISO 8601 expiry.")
    used: bool = Field(description="True once an attempt consumed it (a not_sent attempt does not).")


class AttemptView(BaseModel):
    """One dispatch attempt and its latest outcome."""

    attempt_id: str
    started_at: str = Field(description="ISO 8601 time the attempt was claimed.")
    channel: str | None = Field(default=None, description="Channel of the approval it used.")
    outcome: str | None = Field(default=None, description=(
        "Latest outcome; None = in flight or crashed before recording."))
    outcome_at: str | None = None
    run_id: str | None = None
    facts: OutcomeFacts = Field(default_factory=OutcomeFacts, description="Facts recorded with the latest outcome.")


class LaunchState(BaseModel):
    """Everything the store knows about one plan.

    ``status``: ``planned`` (no usable approval), ``approved`` (an unused, unexpired
    approval of the current plan hash), ``in_flight`` (an attempt without outcome),
    ``dispatched`` (created or reconciled: ``run_id`` set), ``ambiguous`` (ambiguous or
    still_unknown: reconcile), ``rejected`` / ``not_sent`` (last attempt; may retry).
    """

    plan_id: str
    plan_hash: str = Field(description="Hash of the plan as recorded.")
    planned_at: str
    plan: PlanRecord = Field(description="The plan as recorded.")
    approvals: list[ApprovalView] = Field(default_factory=list)
    attempts: list[AttemptView] = Field(default_factory=list)
    last_outcome: str | None = None
    run_id: str | None = None
    status: Literal["planned", "approved", "in_flight", "dispatched", "ambiguous", "rejected", "not_sent"]
    last_activity: str = Field(description="ISO 8601 time of the latest record for this plan.")


@dataclass
class _Plan:
    record: PlanRecord
    approvals: list[ApprovalRecord] = field(default_factory=list)
    attempts: dict[str, AttemptRecord] = field(default_factory=dict)  # attempt_id -> attempt, in order
    outcomes: dict[str, OutcomeRecord] = field(default_factory=dict)  # attempt_id -> latest outcome
    order: int = 0

    def outcome_of(self, attempt_id: str) -> str | None:
        rec = self.outcomes.get(attempt_id)
        return rec.outcome if rec else None

    def token_used(self, token_sha256: str) -> bool:
        return any(a.token_sha256 == token_sha256 and self.outcome_of(aid) != "not_sent"
                   for aid, a in self.attempts.items())

    def blocking(self) -> tuple[str, str | None] | None:
        """(``already_dispatched`` | ``ambiguous_launch``, run id) when an attempt was sent."""
        sent = [aid for aid in self.attempts if self.outcome_of(aid) not in RETRYABLE_OUTCOMES]
        if not sent:
            return None
        for aid in sent:
            if self.outcome_of(aid) in ("created", "reconciled"):
                return "already_dispatched", self.outcomes[aid].run_id
        return "ambiguous_launch", None

    @property
    def last_activity(self) -> str:
        times = [self.record.planned_at, *(a.minted_at for a in self.approvals),
                 *(a.started_at for a in self.attempts.values()), *(o.at for o in self.outcomes.values())]
        return max(times)


def _fold(store: Store, records: list[PlanRecord]) -> list[_Plan]:
    plans = {r.plan_id: _Plan(r, order=i) for i, r in enumerate(records)}
    approvals, attempts, outcomes = store.records_of(list(plans))
    for a in approvals:
        plans[a.plan_id].approvals.append(a)
    owner_of = {}
    for t in attempts:
        plans[t.plan_id].attempts[t.attempt_id] = t
        owner_of[t.attempt_id] = t.plan_id
    for o in outcomes:
        plans[owner_of[o.attempt_id]].outcomes[o.attempt_id] = o
    return list(plans.values())


def _one(store: Store, plan_id: str) -> _Plan | None:
    record = store.plan(plan_id)
    return _fold(store, [record])[0] if record is not None else None


def _state(p: _Plan, now: datetime) -> LaunchState:
    record = p.record
    approvals = [
        ApprovalView(approval_id=a.token_sha256[:12], channel=a.channel, checked=a.checked, owner=a.owner,
                     plan_hash=a.plan_hash, minted_at=a.minted_at, expires_at=a.expires_at,
                     used=p.token_used(a.token_sha256))
        for a in p.approvals
    ]
    attempts = []
    for aid, a in p.attempts.items():
        o = p.outcomes.get(aid)
        attempts.append(AttemptView(
            attempt_id=aid, started_at=a.started_at, channel=a.channel, outcome=o.outcome if o else None,
            outcome_at=o.at if o else None, run_id=o.run_id if o else None,
            facts=o.facts if o else OutcomeFacts()))
    last_outcome = attempts[-1].outcome if attempts else None
    blocking = p.blocking()
    run_id = next((a.run_id for a in reversed(attempts) if a.run_id), None)
    if blocking and blocking[0] == "already_dispatched":
        status = "dispatched"
    elif blocking:
        status = "in_flight" if any(a.outcome is None for a in attempts) else "ambiguous"
    elif record.imported_from is None and any(
        not a.used and a.plan_hash == record.plan_hash and datetime.fromisoformat(a.expires_at) > now
        for a in approvals
    ):
        status = "approved"
    elif last_outcome in RETRYABLE_OUTCOMES:
        status = last_outcome
    else:
        status = "planned"
    return LaunchState(plan_id=record.plan_id, plan_hash=record.plan_hash, planned_at=record.planned_at, plan=record,
                       approvals=approvals, attempts=attempts, last_outcome=last_outcome, run_id=run_id,
                       status=status, last_activity=p.last_activity)


def imported_failure(record: PlanRecord) -> Any:
    """``unknown_plan`` for a plan imported from an old ledger: never approved or sent; plan it again."""
    plan = call("mf_plan_run", config_path=record.config_path) if record.config_path else None
    return fail("unknown_plan", f"Plan {record.plan_id} was imported from the old ledger {record.imported_from}, for "
                "the record: an imported plan is never approved or sent.",
                f"Plan it again ({plan or 'mf_plan_run'}) and get the new plan approved.",
                next_calls=[plan] if plan else [])


# --------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------


def record_plan(store: Store, record: PlanRecord) -> PlanRecord:
    """Record a plan (the facts shown to the human and the material its hash covers). Returns the
    record as stored (scrubbed)."""
    return store.add_plan(record)


def mint(
    store: Store, plan_id: str, plan_hash: str, channel: str, ttl_seconds: int = 900,
    owner: str | None = None, *, checked: str | None = None, terms: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> str:
    """Record a human approval of ``plan_hash`` for ``plan_id`` and return its token.

    Call this only from a human channel (``channel``: one of :data:`CHANNELS`), never on
    the model's say-so. The token, ``mfc_<plan_id>_<40 hex>`` (160 random bits), is
    returned once and never stored: the store keeps ``sha256(token)``, the channel and what it
    checked (``checked``, default :data:`CHECKED`), the ``owner`` it was approved for (team id or
    ``personal``, for the record; the binding is the hash, which contains the team), ``terms``
    approved with it, and ``expires_at = now + ttl_seconds`` (1..86400).

    Raises ValueError for an unknown channel or a ttl out of range, and
    ``ToolFailure(unknown_plan)`` when no plan with this id and hash exists, or it was imported.
    """
    if channel not in CHANNELS:
        raise ValueError(f"channel must be one of {', '.join(CHANNELS)}")
    if not 0 < ttl_seconds <= MAX_TTL_SECONDS:
        raise ValueError(f"ttl_seconds must be in 1..{MAX_TTL_SECONDS}")
    now = _aware(now)
    token = f"mfc_{plan_id}_{secrets.token_hex(20)}"
    with store.write():
        record = store.plan(plan_id)
        if record is None or record.plan_hash != plan_hash:
            raise fail("unknown_plan", f"There is no plan {plan_id} with this plan hash.",
                       "Call mf_plan_run and approve the plan_id and plan_hash it returns.")
        if record.imported_from is not None:
            raise imported_failure(record)
        store.add_approval(plan_id=plan_id, plan_hash=plan_hash, token_sha256=_token_sha256(token), channel=channel,
                           checked=checked or CHECKED[channel], owner=owner, terms=terms,
                           expires_at=iso(now + timedelta(seconds=ttl_seconds)))
    return token


@dataclass(frozen=True)
class Claim:
    """The right to send one request for a plan. Record its outcome with
    ``record_outcome(store, claim.plan_id, claim.attempt_id, ...)``."""

    plan_id: str
    attempt_id: str
    plan_hash: str
    channel: str


def claim_dispatch(
    store: Store, plan_id: str, current_plan_hash: str, token: str | None, now: datetime | None = None
) -> Claim:
    """Check the approval and record an ``attempt``, in one transaction (atomic across processes).

    ``current_plan_hash``: :func:`plan_hash` recomputed from the config *as it is now*.
    Only after this returns may the caller send the request, exactly once; it must then call
    :func:`record_outcome`. Two processes racing with the same token: exactly one wins.

    Raises ``ToolFailure`` with code ``unknown_plan``, ``already_dispatched`` (run id in the
    message when known), ``ambiguous_launch`` (``ambiguous=True``: reconcile, never re-send),
    ``confirmation_required``, ``confirmation_invalid``, ``plan_changed``,
    ``confirmation_expired`` or ``confirmation_used``; see the module docstring; and the store's
    ``state_busy`` / ``state_read_only`` / ``state_unusable``.
    """
    now = _aware(now)
    with store.write():
        p = _one(store, plan_id)
        if p is None:
            raise fail("unknown_plan", f"There is no plan {plan_id} in the state store {store.path}.",
                       "Call mf_plan_run first, then get the plan approved.")
        blocking = p.blocking()
        if blocking and blocking[0] == "already_dispatched":
            run = f" as run {blocking[1]}" if blocking[1] else ""
            watch = call("mf_get_run", run_id=blocking[1]) if blocking[1] else call("mf_list_launches")
            raise fail("already_dispatched", f"Plan {plan_id} was already dispatched{run}; it is never sent twice.",
                       f"Monitor it with {watch}; to launch again, plan a new run.", next_calls=[watch])
        if blocking:
            again, launches = call("mf_dispatch_run", plan_id=plan_id), call("mf_list_launches")
            raise fail("ambiguous_launch",
                       f"A dispatch of plan {plan_id} may have reached the platform (in flight, interrupted, "
                       "or its answer was lost). It must not be sent again.",
                       f"Do not repeat the request. Reconcile first: {again} (it only reconciles), or see "
                       f"{launches}.", ambiguous=True, next_calls=[again, launches])
        if p.record.imported_from is not None:
            raise imported_failure(p.record)
        approve = f"Ask the user to approve plan {plan_id} through a human channel (the host's approval prompt, " \
                  f"or `model-factory approve {plan_id}` in their own terminal), then pass the confirmation it gives."
        if not token:
            raise fail("confirmation_required", f"Dispatching plan {plan_id} needs a confirmation from a human.",
                       approve)
        digest = _token_sha256(token)
        approval = next((a for a in p.approvals if hmac.compare_digest(a.token_sha256, digest)), None)
        if approval is None:
            raise fail("confirmation_invalid", f"That confirmation is not valid for plan {plan_id}.", approve)
        if approval.plan_hash != current_plan_hash:
            raise fail("plan_changed",
                       f"The approval of plan {plan_id} was given for plan hash {approval.plan_hash}; the plan "
                       f"is now {current_plan_hash}, so the approval does not cover it.",
                       "Call mf_plan_run again and get the new plan approved.")
        if datetime.fromisoformat(approval.expires_at) <= now:
            raise fail("confirmation_expired", f"The confirmation for plan {plan_id} expired at "
                       f"{approval.expires_at}.", approve)
        if p.token_used(digest):
            raise fail("confirmation_used",
                       f"That confirmation was already used by an attempt to dispatch plan {plan_id}; "
                       "each confirmation launches once.", approve)
        attempt_id = "att_" + uuid.uuid4().hex
        store.add_attempt(AttemptRecord(attempt_id=attempt_id, plan_id=plan_id, plan_hash=current_plan_hash,
                                        approval_id=approval.approval_id, token_sha256=digest,
                                        channel=approval.channel, started_at=iso(now)))
    return Claim(plan_id=plan_id, attempt_id=attempt_id, plan_hash=current_plan_hash, channel=approval.channel)


def record_outcome(
    store: Store, plan_id: str, attempt_id: str, outcome: str, run_id: str | None = None, **facts: Any
) -> OutcomeRecord:
    """Record the ``outcome`` of an attempt; the latest outcome of an attempt counts.

    ``outcome``: ``created`` (``run_id`` required), ``rejected`` (4xx; e.g.
    ``status_code=402``), ``not_sent`` (nothing left this machine), ``ambiguous`` (sent,
    no answer), ``reconciled`` (an unresolved attempt matched to ``run_id``), or
    ``still_unknown`` (reconciliation found nothing yet). ``facts``: the fields of
    :class:`~tools.guardrails.records.OutcomeFacts` (scrubbed on write). A launch's or resume's
    ``created`` / ``reconciled`` also records the run link (a resume's names the run it continues).

    Raises ValueError for an unknown outcome, ``created`` without ``run_id``, or an
    attempt id the store does not have for this plan.
    """
    if outcome not in OUTCOMES:
        raise ValueError(f"outcome must be one of {', '.join(sorted(OUTCOMES))}")
    if outcome == "created" and not run_id:
        raise ValueError("outcome 'created' needs the run_id")
    with store.write():
        p = _one(store, plan_id)
        if p is None or attempt_id not in p.attempts:
            raise ValueError(f"no attempt {attempt_id} for plan {plan_id}")
        record = p.record
        at = iso(utc_now())
        link = None
        if run_id and outcome in ("created", "reconciled") and record.action in ("launch", "resume"):
            link = RunLink(run_id=run_id, platform_url=record.platform_url, plan_id=plan_id,
                           continues=record.run_id if record.action == "resume" else None, at=at)
        return store.add_outcome(OutcomeRecord(attempt_id=attempt_id, outcome=outcome, run_id=run_id,
                                               facts=OutcomeFacts(**facts), at=at), link=link)


def launch_state(store: Store, plan_id: str, now: datetime | None = None) -> LaunchState:
    """The folded state of one plan. Raises ``ToolFailure(unknown_plan)``."""
    p = _one(store, plan_id)
    if p is None:
        launches = call("mf_list_launches")
        raise fail("unknown_plan", f"There is no plan {plan_id} in the state store {store.path}.",
                   f"See the known plans with {launches}, or plan one (mf_plan_run).", next_calls=[launches])
    return _state(p, _aware(now))


def _states(store: Store, now: datetime | None, **where: Any) -> list[LaunchState]:
    now = _aware(now)
    return [_state(p, now) for p in _fold(store, store.plans(**where))]


def unresolved_launches(
    store: Store, *, platform_url: str | None, team_id: str | None, account_id: str | None, file_sha256: str,
    exclude: str | None = None, now: datetime | None = None,
) -> list[LaunchState]:
    """Launch plans of the same owner (:meth:`PlanRecord.same_owner`: the team ``team_id``, or the
    personal account of ``account_id``) on ``platform_url`` over a config file with these bytes
    (``file_sha256``, hex) whose status is in :data:`UNRESOLVED_STATUSES`: a run may exist for them
    that nobody has found yet. Oldest plan first; ``exclude`` leaves one plan out (the one being
    planned or dispatched). Reads the store only: reconciling them is the launch tools' job
    (``tools.launch._reconcile``)."""
    return [s for s in _states(store, now, platform_url=platform_url)
            if s.plan_id != exclude and s.plan.action == "launch" and s.plan.same_owner(team_id, account_id)
            and s.plan.file_sha256 == file_sha256 and s.status in UNRESOLVED_STATUSES]


def unresolved_actions(store: Store, run_id: str, *, platform_url: str | None, exclude: str | None = None,
                       now: datetime | None = None) -> list[LaunchState]:
    """Stop, pause and restart plans of run ``run_id`` whose request may have reached the platform with
    an outcome nobody knows yet (:data:`UNRESOLVED_STATUSES`), oldest first: the next plan for that
    run names each one, and a person decides."""
    return [s for s in _states(store, now, platform_url=platform_url, run_id=run_id)
            if s.plan_id != exclude and s.plan.action in CONTROL_ACTIONS and s.status in UNRESOLVED_STATUSES]


def list_launches(store: Store, limit: int = 20, now: datetime | None = None, *,
                  platform_url: str | None = None) -> list[LaunchState]:
    """Up to ``limit`` plans (of ``platform_url`` when given), most recently active first."""
    now = _aware(now)
    plans = sorted(_fold(store, store.plans(platform_url=platform_url)),
                   key=lambda p: (p.last_activity, p.order), reverse=True)
    return [_state(p, now) for p in plans[: max(limit, 0)]]


def plan_of_run(store: Store, run_id: str, now: datetime | None = None, *,
                platform_url: str | None = None) -> LaunchState | None:
    """The plan that launched (or resumed into) run ``run_id`` (on ``platform_url`` when given): the
    latest whose outcome names it (its run link), else None. Stop and other control plans, which name
    an existing run, are not launches of it."""
    made = [link.plan_id for link in store.run_links(run_id, platform_url) if link.run_id == run_id]
    found = None
    for plan_id in made:
        state = launch_state(store, plan_id, now)
        if state.run_id == run_id:
            found = state
    return found


def resumes_of(store: Store, run_id: str, *, exclude: str | None = None,
               now: datetime | None = None) -> list[LaunchState]:
    """Resume plans of the paused run ``run_id`` that were sent: ``dispatched`` (``run_id`` of the
    state is the new run), or unresolved (:data:`UNRESOLVED_STATUSES`: a new run may exist nobody
    found yet). Oldest first; ``exclude`` leaves one plan out (the one being planned or sent).
    Store only: a second resume of the same pause would start a second billed run."""
    return [s for s in _states(store, now, run_id=run_id)
            if s.plan_id != exclude and s.plan.action == "resume"
            and (s.status == "dispatched" or s.status in UNRESOLVED_STATUSES)]
