"""A human-written budget policy that can pre-authorize plans within limits.

The file is TOML at ``$MODEL_FACTORY_POLICY``, else ``<home>/.config/model-factory/policy.toml``
with the home folder the prime config is read from (:func:`tools.platform.settings.home_folder`:
the context's ``home``, else ``$HOME``, else the user's home)::

    max_usd_per_run = 25.0             # required: compared with the plan's HIGH cost estimate
    max_gpus = 8                       # optional limits from here on
    allowed_gpu_types = ["H100_80GB", "H200_141GB"]
    allowed_models = ["Qwen/Qwen3-*"]  # shell-style wildcards
    max_steps = 500
    max_concurrent_runs = 2            # queued or running runs of the owner, this one included
    owners = ["personal", "cteam0000000000000000000001"]
    spend_cap_usd_per_run = 5.0        # optional spend caps: the run is PAUSED before its spend passes them
    spend_cap_usd_per_day = 20.0       # (model-factory watch RUN, mf_wait_for_run); a pause authorized here
    stop_when_cap_cannot_pause = false # true: a run the cap cannot pause is stopped (steps since its checkpoint lost)

Why it must live outside the project folder: the agent edits files in the project (configs,
the state folder). A policy it could write would be an approval it could give itself. So a
policy inside a folder the caller names as agent-writable (the project, the state folder),
or writable by group/others, is refused. (An agent with write access to the user's home can
still edit it; this keeps honest mistakes and casual self-approval out, not a determined
adversary with the same file permissions as the user.)

A policy that is missing or malformed authorizes nothing and says why; :attr:`Policy.problem`
is that reason when the person evidently meant to use one (``$MODEL_FACTORY_POLICY`` set, or
a file at the default place), so planning and dispatch can say so instead of ignoring it. Every
check fails closed: an unknown fact (cost, GPU count, ...) that a limit needs is a denial.
"""

from __future__ import annotations

import hashlib
import os
import tomllib
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tools.platform.settings import home_folder
from tools.units import USD, usd

if TYPE_CHECKING:
    from tools.core import Context

POLICY_ENV = "MODEL_FACTORY_POLICY"


class PolicyLimits(BaseModel):
    """The limits in a policy file (unknown keys and loose types are errors, so a typo
    cannot silently drop a limit)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    max_usd_per_run: float = Field(ge=0, allow_inf_nan=False, description=(
        "USD, finite and not negative; the plan's high cost estimate must be at most this."))
    max_gpus: int | None = Field(default=None, ge=1, description="GPUs per run.")
    allowed_gpu_types: list[str] | None = Field(default=None, description="Exact GPU type names, e.g. H100_80GB.")
    allowed_models: list[str] | None = Field(default=None, description="Model names; shell wildcards allowed.")
    max_steps: int | None = Field(default=None, ge=1, description="Training steps per run.")
    max_concurrent_runs: int | None = Field(default=None, ge=0, description="Active runs of the owner incl. this one.")
    owners: list[str] | None = Field(default=None, description="Team ids, or 'personal' for the personal account.")
    spend_cap_usd_per_run: float | None = Field(default=None, gt=0, allow_inf_nan=False, description=(
        "USD: a run (its resume chain) is paused before its spend passes this."))
    spend_cap_usd_per_day: float | None = Field(default=None, gt=0, allow_inf_nan=False, description=(
        "USD: runs are paused before the spend of this store's runs of the UTC day passes this."))
    stop_when_cap_cannot_pause: bool = Field(default=False, description=(
        "True: a run the spend cap cannot pause (a failed pause) is stopped instead; false: an alert only."))


class Policy(BaseModel):
    """A loaded policy: ``limits`` when usable, else ``error`` says why it authorizes nothing."""

    path: Path
    limits: PolicyLimits | None = None
    error: str | None = None
    sha256: str | None = Field(default=None, description="Hex sha256 of the file bytes, for the approval record.")
    explicit: bool = Field(default=False, description="The path was named ($MODEL_FACTORY_POLICY or an argument), "
                                                      "not the default location.")

    @property
    def problem(self) -> str | None:
        """``error`` when a policy was evidently meant to apply (the path was named, or a file
        exists at the default place); ``None`` when it is usable or simply absent."""
        return self.error if self.error and (self.explicit or self.path.exists()) else None


class PlanFacts(BaseModel):
    """What a policy judges about one plan. ``None`` means unknown (and fails any limit
    that needs it)."""

    model_config = ConfigDict(extra="forbid")

    usd_high: USD | None = Field(default=None, description="High cost estimate of the run, USD.")
    gpu_count: int | None = None
    gpu_type: str | None = None
    model: str | None = Field(default=None, description="Model name, e.g. Qwen/Qwen3-4B.")
    steps: int | None = Field(default=None, description="Step cap of the run (max_steps).")
    owner: str | None = Field(default=None, description="Team id, or 'personal'.")
    active_runs: int | None = Field(default=None, description=(
        "Queued or running runs of the owner now, excluding this one."))
    unresolved_launches: list[str] = Field(default_factory=list, description=(
        "Plan ids of earlier launches of the same config and owner whose outcome is unknown, which this plan "
        "acknowledges (it may start a second run): a policy never approves such a plan."))
    already_resumed: list[str] = Field(default_factory=list, description=(
        "For a resume: the runs (or unresolved plans) the same paused run was already resumed as: a policy never "
        "approves a second resume of one pause."))


class PolicyDecision(BaseModel):
    """``allowed``: the plan may be approved on the ``policy`` channel without asking.
    ``reasons``: every failed check when denied; every passed check when allowed."""

    allowed: bool
    reasons: list[str]
    policy_path: str | None = None
    policy_sha256: str | None = None


def policy_path(env: Mapping[str, str] | None = None, home: Path | None = None) -> Path:
    """``$MODEL_FACTORY_POLICY`` (``~`` expanded) if set and non-blank, else
    ``<home>/.config/model-factory/policy.toml`` where home is ``home``, else ``env["HOME"]``,
    else ``Path.home()`` (the rule of the prime config: :func:`tools.platform.settings.home_folder`)."""
    env = os.environ if env is None else env
    configured = (env.get(POLICY_ENV) or "").strip()
    if configured:
        return Path(configured).expanduser()
    return home_folder(env, home) / ".config" / "model-factory" / "policy.toml"


def load_policy(
    path: str | Path | None = None,
    *,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
    agent_writable: Iterable[str | Path] = (),
) -> Policy:
    """Read and check the policy file (default :func:`policy_path`). Never raises for a
    bad file: the returned :class:`Policy` carries ``error`` instead.

    ``agent_writable``: folders the agent writes to (pass ``ctx.cwd`` and
    ``ctx.state_path()``); a policy inside one of them is refused. A path named by ``path`` or
    ``$MODEL_FACTORY_POLICY`` is ``explicit``: when it is missing, :attr:`Policy.problem` says so.
    """
    env = os.environ if env is None else env
    named = path is not None or bool((env.get(POLICY_ENV) or "").strip())
    p = Path(path) if path is not None else policy_path(env, home)

    def refused(error: str, digest: str | None = None) -> Policy:
        return Policy(path=p, sha256=digest, error=error, explicit=named)

    resolved = p.resolve()
    for folder in agent_writable:
        if resolved.is_relative_to(Path(folder).resolve()):
            return refused(f"The policy {p} is inside {folder}, a folder the agent writes to; "
                           "move it to ~/.config/model-factory/policy.toml.")
    try:
        data = p.read_bytes()
        mode = p.stat().st_mode
    except FileNotFoundError:
        if path is None and named:
            return refused(f"{POLICY_ENV} names {p}, but there is no file there; nothing is pre-authorized.")
        return refused(f"No budget policy at {p}; nothing is pre-authorized.")
    except OSError as exc:
        return refused(f"The policy {p} cannot be read ({exc.strerror}); nothing is pre-authorized.")
    digest = hashlib.sha256(data).hexdigest()
    if os.name == "posix" and mode & 0o022:
        return refused(f"The policy {p} is writable by group or others; make it private (chmod 600 {p}).", digest)
    try:
        raw = tomllib.loads(data.decode("utf-8"))
        limits = PolicyLimits.model_validate(raw)
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return refused(f"The policy {p} is not valid TOML: {exc}.", digest)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(x) for x in e['loc']) or '(file)'}: {e['msg']}" for e in exc.errors()
        )
        return refused(f"The policy {p} is malformed: {problems}.", digest)
    return Policy(path=p, limits=limits, sha256=digest, explicit=named)


def load_for_context(ctx: Context) -> Policy:
    """:func:`load_policy` for a tool context: its env and home, with its working folder and
    state folder as the agent-writable folders."""
    return load_policy(env=ctx.env, home=ctx.home, agent_writable=[ctx.cwd or Path.cwd(), ctx.state_path()])


def evaluate(policy: Policy, facts: PlanFacts) -> PolicyDecision:
    """Judge ``facts`` against ``policy``. Denied when the policy has an ``error`` or any
    limit fails; a limit whose fact is unknown fails. Pure: no I/O."""
    def decision(allowed: bool, reasons: list[str]) -> PolicyDecision:
        return PolicyDecision(allowed=allowed, reasons=reasons, policy_path=str(policy.path),
                              policy_sha256=policy.sha256)

    if policy.limits is None:
        return decision(False, [policy.error or f"The policy {policy.path} has no limits."])
    if facts.unresolved_launches:
        return decision(False, [f"it launches again while earlier launch(es) {', '.join(facts.unresolved_launches)} "
                                "of the same config are unresolved; a budget policy never approves that, a person "
                                "must"])
    if facts.already_resumed:
        return decision(False, [f"the paused run was already resumed ({', '.join(facts.already_resumed)}); a budget "
                                "policy never approves a second resume of one pause, a person must"])
    lim = policy.limits
    passed: list[str] = []
    failed: list[str] = []

    def check(ok: bool, good: str, bad: str) -> None:
        (passed if ok else failed).append(good if ok else bad)

    if facts.usd_high is None:
        failed.append("The cost of the run is unknown, so the policy cannot cover it.")
    else:
        check(facts.usd_high <= lim.max_usd_per_run,
              f"high cost estimate {usd(facts.usd_high)} <= max_usd_per_run {usd(lim.max_usd_per_run)}",
              f"high cost estimate {usd(facts.usd_high)} exceeds max_usd_per_run {usd(lim.max_usd_per_run)}")
    if lim.max_gpus is not None:
        if facts.gpu_count is None:
            failed.append("GPU count is unknown; the policy limits max_gpus.")
        else:
            check(facts.gpu_count <= lim.max_gpus, f"{facts.gpu_count} GPUs <= max_gpus {lim.max_gpus}",
                  f"{facts.gpu_count} GPUs exceeds max_gpus {lim.max_gpus}")
    if lim.allowed_gpu_types is not None:
        check(facts.gpu_type in lim.allowed_gpu_types, f"GPU type {facts.gpu_type} is allowed",
              f"GPU type {facts.gpu_type or '(unknown)'} is not in allowed_gpu_types")
    if lim.allowed_models is not None:
        ok = facts.model is not None and any(fnmatchcase(facts.model, pat) for pat in lim.allowed_models)
        check(ok, f"model {facts.model} is allowed", f"model {facts.model or '(unknown)'} is not in allowed_models")
    if lim.max_steps is not None:
        if facts.steps is None:
            failed.append("The step cap is unknown; the policy limits max_steps.")
        else:
            check(facts.steps <= lim.max_steps, f"{facts.steps} steps <= max_steps {lim.max_steps}",
                  f"{facts.steps} steps exceeds max_steps {lim.max_steps}")
    if lim.max_concurrent_runs is not None:
        if facts.active_runs is None:
            failed.append("The number of active runs is unknown; the policy limits max_concurrent_runs.")
        else:
            total = facts.active_runs + 1
            check(total <= lim.max_concurrent_runs,
                  f"{total} active runs with this one <= max_concurrent_runs {lim.max_concurrent_runs}",
                  f"{total} active runs with this one exceeds max_concurrent_runs {lim.max_concurrent_runs}")
    if lim.owners is not None:
        check(facts.owner in lim.owners, f"owner {facts.owner} is allowed",
              f"owner {facts.owner or '(unknown)'} is not in owners")
    return decision(not failed, failed or passed)
