"""The typed records of the state store (:mod:`tools.guardrails.store`): one pydantic model per kind.

Nothing reads a stored record as a dict: the store returns these models, and every field a tool
reads is a typed attribute. What each kind holds:

* :class:`PlanRecord` - a plan as recorded (launch, resume, stop, pause, restart): the hashed
  ``material`` (exactly what :func:`tools.guardrails.confirmation.plan_hash` covered) and, typed,
  the facts the tools read: action, owner (platform URL, account id, team), the run it acts on,
  secret names, cost, fingerprint, config file, the arguments it is rebuilt from, the summary a
  person approved.
* :class:`ApprovalRecord` - one approval: the channel that made it and what that channel checked
  (``checked``, e.g. ``terminal, same user``: never more than the channel can know), the hash of
  the token (never the token), its expiry, and ``terms`` (extra conditions recorded with it, e.g.
  a spend cap; empty today).
* :class:`AttemptRecord` / :class:`OutcomeRecord` - a claim to send the plan's one request, and
  what came of it (:class:`OutcomeFacts`).
* :class:`RunLink` - which run a plan made, and which run it continues (a resume chain).
* :class:`AuditRecord` - one tool call, for a person to read afterwards (``model-factory history``).
* :class:`ImportRecord` - an old ``launches.jsonl`` taken in once, for the record.

Times are ISO 8601 text in UTC with milliseconds (:func:`iso`).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Action = Literal["launch", "resume", "stop", "pause", "restart"]
#: The channels an approval comes from; the first three are a person's, ``policy`` is the budget policy they wrote.
Channel = Literal["terminal", "mcp_elicitation", "mcp_app", "host_callback", "policy"]
Outcome = Literal["created", "rejected", "not_sent", "ambiguous", "reconciled", "still_unknown"]


def utc_now() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(timezone.utc)


def iso(ts: datetime) -> str:
    """``ts`` as ISO 8601 with milliseconds and offset (naive datetimes are taken as UTC)."""
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=timezone.utc)
    return ts.astimezone(timezone.utc).isoformat(timespec="milliseconds")


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PlanCost(_Record):
    """The cost facts of a plan, USD (None: unknown)."""

    usd_per_gpu_hour: float | None = None
    usd_low: float | None = None
    usd_expected: float | None = None
    usd_high: float | None = None


class PlanRecord(_Record):
    """A plan as recorded. ``material`` is the exact dict its ``plan_hash`` was made from; the typed
    fields repeat the facts of it the tools read, plus what is shown and rebuilt but not hashed.

    Owner: ``platform_url`` (the API base URL), ``account_id`` (GET /user/whoami ``id`` of the API key
    that planned it) and ``team_id`` (None: that account's personal account)."""

    plan_id: str
    plan_hash: str
    action: Action = "launch"
    planned_at: str
    platform_url: str | None = None
    account_id: str | None = None
    team_id: str | None = None
    owner_label: str | None = None
    run_id: str | None = Field(default=None, description="The existing run a resume, stop, pause or restart acts on.")
    name: str | None = Field(default=None, description="The run's name (launch: with the fingerprint).")
    model: str | None = None
    mode: str | None = None
    fingerprint: str | None = Field(default=None, description="The run name's -mf<hex> suffix (launch plans).")
    config_path: str | None = None
    file_sha256: str | None = None
    config_sha256: str | None = None
    env_files: list[str] = Field(default_factory=list)
    gpu_type: str | None = None
    gpu_count: int | None = None
    volume: str | None = None
    image_tag: str | None = None
    source_ref: str | None = None
    max_steps: int | None = None
    secret_names: list[str] = Field(default_factory=list)
    cost: PlanCost | None = None
    acknowledged_unresolved: list[str] = Field(default_factory=list)
    already_resumed_as: list[str] = Field(default_factory=list)
    arguments: dict[str, Any] = Field(default_factory=dict, description="The tool input the plan is rebuilt from.")
    summary: str = ""
    material: dict[str, Any] = Field(default_factory=dict)
    imported_from: str | None = Field(default=None, description=(
        "The old launches.jsonl this plan was imported from (for the record: never approved or sent)."))

    @classmethod
    def of(cls, plan_id: str, plan_hash: str, material: dict[str, Any], *, planned_at: str | None = None,
           **facts: Any) -> PlanRecord:
        """The record of a plan whose hash ``plan_hash`` was made from ``material`` (planned now unless
        ``planned_at`` says when): the typed fields are taken from ``material`` where it has them, then
        from ``facts``."""
        typed = {k: v for k, v in material.items() if k in cls.model_fields and k not in ("material", "plan_id")}
        return cls(plan_id=plan_id, plan_hash=plan_hash, planned_at=planned_at or iso(utc_now()),
                   material=dict(material), **{**typed, **facts})

    def same_owner(self, team_id: str | None, account_id: str | None) -> bool:
        """Whether this plan's run is billed to the same owner as ``team_id`` / ``account_id``: the same
        team whoever planned it, else the personal account of the same account (two API keys' personal
        accounts are two owners). An account not recorded (a plan imported from an old ledger) counts
        as the same: launch-once errs on the side of asking."""
        if self.team_id or team_id:
            return self.team_id == team_id
        return self.account_id is None or account_id is None or self.account_id == account_id

    @property
    def usd_high(self) -> float | None:
        """The high cost estimate, USD (None: unknown or not a billed plan)."""
        return self.cost.usd_high if self.cost else None


class ApprovalRecord(_Record):
    """One approval of a plan hash (the token is never stored, only its sha256)."""

    approval_id: int
    plan_id: str
    plan_hash: str
    token_sha256: str
    channel: Channel
    checked: str = Field(description="What the channel checked, e.g. 'terminal, same user'.")
    owner: str | None = None
    terms: dict[str, Any] = Field(default_factory=dict, description="Extra terms approved with the plan (none yet).")
    minted_at: str
    expires_at: str


class OutcomeFacts(_Record):
    """Facts recorded with an outcome (each optional)."""

    channel: str | None = None
    gpu_type: str | None = None
    usd_per_gpu_hour: float | None = None
    estimated_usd_per_hour: float | None = None
    on_demand: bool | None = None
    status_code: int | None = None
    detail: str | None = None
    matches: list[str] = Field(default_factory=list)
    found_before_sending: bool = False
    evidence: str | None = Field(default=None, description="What showed a lost answer's request took effect.")


class AttemptRecord(_Record):
    """One claim to send a plan's request (at most one is ever unresolved)."""

    attempt_id: str
    plan_id: str
    plan_hash: str
    approval_id: int | None = None
    token_sha256: str | None = None
    channel: str | None = None
    started_at: str


class OutcomeRecord(_Record):
    """What came of an attempt (the latest one counts)."""

    attempt_id: str
    outcome: Outcome
    run_id: str | None = None
    facts: OutcomeFacts = Field(default_factory=OutcomeFacts)
    at: str


class RunLink(_Record):
    """A run a plan made on ``platform_url``, and the run it continues (``continues``: a resume's paused run)."""

    run_id: str
    platform_url: str | None = None
    plan_id: str
    continues: str | None = None
    at: str


class AuditRecord(_Record):
    """One tool call: which surface, which tool, its arguments (secrets scrubbed, cut to a bounded
    size), the outcome code (``ok`` or the ToolError code), the run and plan it concerned, and the
    money a person approved in it (``usd_approved``: the high estimate of the plan it launched) or
    the platform reported spent (``usd_spent``)."""

    audit_id: int = 0
    at: str
    surface: str
    tool: str
    arguments: str = Field(description="The arguments as JSON, scrubbed; at most 2,000 characters.")
    outcome: str
    run_id: str | None = None
    plan_id: str | None = None
    usd_approved: float | None = None
    usd_spent: float | None = None
    platform_url: str | None = None


class ImportRecord(_Record):
    """An old ``launches.jsonl`` imported once: its plans and outcomes, never its approvals."""

    source: str
    imported_at: str
    plans: int
    outcomes: int
    approvals_ignored: int

    def words(self) -> str:
        """One sentence for people and agents."""
        return (f"Imported {self.plans} plan(s) and {self.outcomes} outcome(s) from {self.source} at "
                f"{self.imported_at}, for the record (imported plans are never approved or sent; its "
                f"{self.approvals_ignored} approval(s) were not imported); that file is not written again.")
