"""Planning a hosted run: the facts ``mf_plan_run`` shows and ``mf_dispatch_run`` re-checks.

:func:`build_plan` turns a :class:`PlanRunInput` into a :class:`Draft`: the validation (the
config's bytes checked by mf_validate_config's back-ends, ``schema="auto"``, and which one
decided), the hosted config (the tomllib reading as ``prime train`` 0.18.0 ships it, deprecated
keys translated: :func:`tools.configs.hosted_config`, with the step cap applied), the owner, GPU
type and count, price, cost estimate, forwarded secret *names*, volume, image/source pins,
run name and the ``plan_hash`` that an approval is bound to (the estimate itself:
:mod:`tools.launch._cost`). It sends no create and spends
nothing; it is run again at dispatch (and by approval channels) over the *current* config
file, owner and prices, so that any change voids an approval.

Sources: reference/prime-api.md §3.2 (CLI dispatch steps: SFT sniff, CLI-only keys,
deprecated ``[orchestrator]`` keys, source-ref rules, env files), §4 (prepare), §2.4
(``GET /training/available-fft-models`` on-demand prices, ``GET /training/available-gpu-types``),
§2.5 (``GET /training/volumes``); reference/prime-rl.md §3.2 (``max_steps`` propagation) and
the ``[deployment]`` fields (GPU count).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from tools import configs
from tools.core import MAX_SECONDS_PER_STEP, MAX_STEPS, Context, Owner, resolve_owner
from tools.errors import Call, ErrorCode, FieldProblem, ToolFailure, call, fail
from tools.guardrails import secret_detection
from tools.guardrails.confirmation import config_sha256, plan_hash
from tools.guardrails.policy import load_for_context
from tools.guardrails.text import display_problem, shown
from tools.launch._cost import CostEstimate, cap_warning, estimate_cost, magnitude_warnings
from tools.launch._reconcile import Lookup, check_unresolved, parse_plan_ids, unresolved_lines
from tools.platform import errors as perr
from tools.units import duration, usd, usd_per_gpu_hour, usd_per_hour

#: Step cap of a smoke run unless the user asks otherwise.
SMOKE_MAX_STEPS = 20
#: Lifetime of an approval (seconds); a confirmation launches once within it.
APPROVAL_TTL_SECONDS = 900


def split_names(value: object) -> object:
    """``["WANDB_API_KEY,HF_TOKEN"]`` (``--secrets WANDB_API_KEY,HF_TOKEN``) -> both names."""
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return [name.strip() for item in value for name in item.split(",") if name.strip()]
    return value


def displayable(value: str | None) -> str | None:
    """A text argument the plan summary shows (run name, GPU type, volume, image tag): refused
    (ValueError, so ``bad_arguments`` naming the field) when it holds a control character, a bidi
    override or another invisible character (:func:`tools.guardrails.text.display_problem`)."""
    if value is not None and (problem := display_problem(value)):
        raise ValueError(f"{problem}; use letters, digits and punctuation only")
    return value


#: A text argument the plan summary shows (:func:`displayable`).
DisplayText = Annotated[str | None, AfterValidator(displayable)]


#: A ``secrets`` argument: names of variables to forward, comma-separated items split.
SecretNames = Annotated[list[str], BeforeValidator(split_names)]
SECRETS_HELP = ("NAMES of environment variables to forward to the run: only WANDB_API_KEY and HF_TOKEN (an item may "
                "list several, comma-separated). Never values; values are read from the environment / env files only "
                "when the run is started.")


class PlanRunInput(BaseModel):
    """Arguments of ``mf_plan_run``."""

    model_config = ConfigDict(extra="forbid")

    config_path: str = Field(description="Path of the prime-rl TOML to run (absolute, or relative to the "
                                         "working folder), or a bundled example id (mf_list_examples). Validate it "
                                         "first with mf_validate_config.")
    team: str | None = Field(default=None, description=(
        "Who pays: 'personal', a team id (c + 24 lowercase letters/digits, see mf_list_teams), or null for "
        "the configured owner (PRIME_TEAM_ID, then the prime config). Planning stops when null and the "
        "account belongs to teams but none is configured."))
    gpu_type: DisplayText = Field(default=None, description=(
        "GPU type such as H100_80GB (see mf_list_gpus). Null: the TOML's gpu_type, else reserved capacity, else "
        "the cheapest on-demand type."))
    volume: DisplayText = Field(default=None, description="Name of an existing volume of the owner to attach "
                                                         "(see mf_list_volumes). Null: the TOML's volume, or none.")
    secrets: SecretNames = Field(default_factory=list, description=SECRETS_HELP)
    env_files: list[str] = Field(default_factory=list, description=(
        "Paths of .env files to read forwarded secrets from (after the TOML's env_file(s); later wins). As with "
        "prime train, the WANDB_API_KEY / HF_TOKEN they set are forwarded; any other variable in them is refused."))
    run_kind: Literal["smoke", "full"] = Field(default="smoke", description=(
        "smoke: cap the run at min(config max_steps, 20) steps; full: the config's max_steps (none = "
        "runs until stopped)."))
    max_steps: int | None = Field(default=None, ge=1, le=MAX_STEPS,
                                  description="Explicit step cap; overrides run_kind.")
    image_tag: DisplayText = Field(default=None, description="prime-rl image tag (overrides the TOML's "
                                                            "image_tag); null: platform default.")
    source_ref: str | None = Field(default=None, description="prime-rl git branch/tag/sha to overlay "
                                                             "(overrides the TOML's source_ref); null: none.")
    name: DisplayText = Field(default=None, description="Run name (default: the TOML's name, else the file "
                                                       "name); a fingerprint of the plan id is appended.")
    seconds_per_step: float | None = Field(default=None, gt=0, le=MAX_SECONDS_PER_STEP, allow_inf_nan=False,
                                           description=(
        "Your own estimate of seconds per training step, for the cost estimate. Null: a documented "
        "default range by deployment size (an assumption, not platform data)."))
    acknowledge_unresolved: str | None = Field(default=None, description=(
        "Only after an unresolved_launch error, and only when the user has checked the earlier launch and still "
        "wants another run: the plan id(s) that error named, comma-separated. The plan then shows them, and only "
        "a person can approve it (never a budget policy). Null: planning refuses while one is unresolved."))



class RuntimeInfo(BaseModel):
    """What POST /training/runs/prepare said about the prime-rl build (reference §4)."""

    local_validation: Literal["available", "not_supported", "unavailable", "skipped"] = Field(
        description="available: prepare answered; not_supported: platform without local validation "
                    "(404/405); unavailable: 5xx/timeout; skipped: not asked, as prime train run skips it "
                    "(an SFT config with online-eval blocks).")
    note: str = Field(description="What it means, in words.")
    submission_supported: bool | None = Field(default=None, description=(
        "Prepare's submission_supported: true when the platform takes a config compiled locally against schema_commit "
        "(prime train run sends one); false when it does not, and validates the TOML itself when the run is "
        "submitted (note says so in words)."))
    image_commit: str | None = Field(default=None, description="prime-rl image commit (40 hex).")
    source_commit: str | None = Field(default=None, description="Commit of source_ref when set.")
    schema_commit: str | None = Field(default=None, description="Commit of the config schema.")
    digest: str | None = Field(default=None, description="Image digest (sha256:...).")


class Validation(BaseModel):
    """Which schema checked the config of a plan (mf_validate_config's report, schema auto)."""

    schema_check: Literal["real", "snapshot", "structural"] = Field(description=(
        "real (prime-rl's own classes), snapshot (the JSON Schema shipped with this package) or structural (only "
        "this package's rules)."))
    schema_commit: str | None = Field(description="prime-rl commit of that schema ('unknown' when not recorded).")
    schema_source: str = Field(description="Where the schema and its commit came from.")
    schema_interpreter: str | None = Field(default=None, description="The interpreter that ran the real schema.")
    fallback_from: Literal["real", "prime"] | None = Field(default=None, description=(
        "Set when the real schema was found but could not run, and the snapshot decided (a warning says why)."))

    def words(self) -> str:
        """One line for the plan's summary."""
        commit = f" of prime-rl {self.schema_commit[:12]}" if self.schema_commit else ""
        where = f" ({self.schema_interpreter})" if self.schema_interpreter else ""
        fallback = f"; the {self.fallback_from} schema could not run (see the warnings)" if self.fallback_from else ""
        return f"{self.schema_check} schema{commit}{where}{fallback}"


@dataclass
class Draft:
    """A computed plan (internal). ``material`` is what ``plan_hash`` covers."""

    plan_id: str
    args: PlanRunInput
    config_path: Path
    file_sha256: str
    hosted: dict[str, Any]
    mode: Literal["rl", "sft"]
    model: str | None
    owner: Owner
    gpu_type: str | None
    gpu_type_source: str
    gpu_count: int
    cost: CostEstimate
    config_max_steps: int | None
    max_steps: int | None
    max_steps_reason: str
    secret_names: list[str]
    env_files: list[Path]
    volume: str | None
    image_tag: str | None
    source_ref: str | None
    run_name: str
    fingerprint: str
    runtime: RuntimeInfo | None
    validation: Validation
    warnings: list[str] = field(default_factory=list)
    unresolved: list[Lookup] = field(default_factory=list)
    material: dict[str, Any] = field(default_factory=dict)
    plan_hash: str = ""
    account_id: str | None = None

    @property
    def config_sha256(self) -> str:
        """sha256 of the canonical hosted config (``material["config_sha256"]``)."""
        return self.material["config_sha256"]


# -- pure helpers ---------------------------------------------------------------------------


def file_run_name(path: Path) -> str:
    """The run name a config file gives when neither the argument nor the TOML names the run: the
    file's name without ``.toml``, every run of characters other than letters, digits, ``.``, ``_``
    and ``-`` (spaces, control characters, escapes, invisible characters) made one ``-`` (``run``
    when nothing is left). The platform and the dashboard show it; a person approves it."""
    return re.sub(r"[^\w.-]+", "-", path.stem, flags=re.ASCII).strip("-.") or "run"


def refuse_credential_name(name: str, what: str, field: str | None = None) -> None:
    """Raise ``secret_in_input`` when the run name ``name`` (``what`` says where it came from) holds a
    token shaped like a credential (:func:`tools.guardrails.secret_detection.credential_tokens`): the
    name is sent to the platform, shown in the dashboard and recorded. The value is never shown."""
    if secret_detection.credential_tokens(name):
        raise fail("secret_in_input", f"{what} looks like a credential (a long random token; value not shown): a "
                   "run name is sent to the platform, shown in the dashboard and recorded in the launch ledger.",
                   "Name the run with words (the task, the model, a version); secrets travel by name only "
                   "(WANDB_API_KEY / HF_TOKEN, exported or in an env file).",
                   fields=[FieldProblem(path=field, problem="shaped like a credential")] if field else [])


def _config_name_line(d: Draft) -> list[str]:
    """Why the run's name and the ``name`` inside the config sent differ, when they do: the
    platform names the run by the create body's ``name`` (reference/prime-api.md §3.5), and the
    config goes as ``prime train`` sends it (``_hosted_config`` keeps ``name``), so the fingerprint
    is added to the body's name only."""
    inside = d.hosted.get("name") if isinstance(d.hosted, dict) else None
    if not isinstance(inside, str) or inside == d.run_name:
        return []
    return [f"                 (the config inside keeps name = {inside!r}, as prime",
            "                 train sends it; the platform names the run by the request's name)"]


def fingerprint(plan_id: str) -> str:
    """``mf`` + 8 hex digits derived from the plan id; appended to the run name so a run whose
    create answer was lost can be found again (``mf_dispatch_run`` reconciles by it)."""
    return "mf" + hashlib.sha256(plan_id.encode()).hexdigest()[:8]


def apply_step_cap(config: dict[str, Any], cap: int | None) -> None:
    """Set the cap where prime-rl reads it: shared ``max_steps``, and ``trainer.max_steps`` /
    ``orchestrator.max_steps`` only where the config sets them (so shared and sub-config agree)."""
    if cap is None:
        return
    config["max_steps"] = cap
    for section in ("trainer", "orchestrator"):
        sub = config.get(section)
        if isinstance(sub, dict) and "max_steps" in sub:
            sub["max_steps"] = cap


def forwarded_names(asked: list[str], ctx: Context, files: list[Path], warnings: list[str], again: Call,
                    without: Callable[[Path], Call | None] = lambda path: None) -> list[str]:
    """Names to forward: the ``asked`` names (a ``secrets`` argument) plus the forwardable names the
    env files set (as ``prime train`` and ``prime train resume`` forward what their env files hold).
    Validated; values discarded. Lines the env-file parser skipped are added to ``warnings`` (and
    to a ``secret_not_set`` error, since a skipped ``export NAME=...`` line is the usual reason).
    ``again``: the call to make after fixing an env file; ``without(path)``: the call without an env
    file the arguments named (None for one the config names), offered instead of repeating the call
    that failed."""
    in_files: list[str] = []
    skipped: list[str] = []
    for path in files:
        try:
            parsed = secret_detection.parse_env_file(path, ctx.env)
        except secret_detection.EnvFileError as exc:
            other = without(path)
            if other is not None:
                raise fail("env_file_invalid", str(exc), f"Pass the env file that holds the secrets, or plan without "
                           f"this one: {other}.", next_calls=[other]) from None
            raise fail("env_file_invalid", str(exc), f"Fix the env file the config names (env_file / env_files), "
                       f"then plan again: {again}.", next_calls=[again]) from None
        others = sorted(n for n in parsed.values if n not in secret_detection.FORWARDABLE)
        if others:
            raise fail("unsupported_secret",
                       f"Env file {path} sets {', '.join(others)}; only WANDB_API_KEY and HF_TOKEN can be "
                       "forwarded to a run (prime train refuses such a file too).",
                       "Keep only WANDB_API_KEY / HF_TOKEN in the env files a run uses, then plan again.")
        in_files += [n for n in parsed.values if n not in in_files]
        skipped += parsed.warnings
    warnings += skipped
    names = list(dict.fromkeys([*asked, *in_files]))
    try:
        secret_detection.resolve_forwarded(names, ctx.env, files)  # refusals + "is it set"; values not kept
    except ToolFailure as failure:
        if failure.error.code == "secret_not_set" and skipped:
            failure.error.message += " Env-file lines were skipped: " + "; ".join(skipped)
        raise
    return [n.strip() for n in names]


def _prepare(ctx: Context, mode: str, owner: Owner, image_tag: str | None, source_ref: str | None,
             warnings: list[str]) -> RuntimeInfo:
    """POST /training/runs/prepare as the CLI does (§3.2 step 10), as information only. The CLI
    skips it for an SFT config with online-eval blocks (the platform validates those on
    submission): so does this (``skipped``)."""
    try:
        prep = ctx.platform().prepare_run(mode=mode, team_id=owner.team_id, image_tag=image_tag, source_ref=source_ref)
    except (perr.NotFound, perr.InvalidRequest) as exc:
        if isinstance(exc, perr.InvalidRequest) and exc.status != 405:
            raise
        return RuntimeInfo(local_validation="not_supported", note="Platform without local validation (prepare "
                           "answered 404/405); it validates the config on submission.")
    except perr.Unavailable as exc:
        return RuntimeInfo(local_validation="unavailable",
                           note=f"Local validation is unavailable ({exc.message}); the platform validates on "
                                f"submission.")
    if prep.mode and prep.mode != mode:
        warnings.append(f"The platform's prepare answered mode {prep.mode!r} for a {mode!r} config.")
    rt = prep.runtime
    commits = ""
    if rt and rt.image_commit:
        source = f", source commit {rt.source_commit[:12]}" if rt.source_commit else ""
        commits = f" (image commit {rt.image_commit[:12]}{source})"
    server_side = "; the platform validates the config on submission (submission_supported false)" \
        if prep.submission_supported is False else ""
    return RuntimeInfo(
        local_validation="available", submission_supported=prep.submission_supported,
        note=f"prepare resolved the prime-rl runtime{commits}{server_side}.",
        image_commit=rt.image_commit if rt else None, source_commit=rt.source_commit if rt else None,
        schema_commit=rt.schema_commit if rt else None, digest=rt.digest if rt else None)


def _schema_mismatch(check: str, validated: str | None, runtime: RuntimeInfo | None) -> str | None:
    """A warning when the prime-rl commit whose schema validated the config is not the one the run will use
    (prepare's runtime: its schema commit, else source commit, else image commit); None when either is unknown or
    they match."""
    run_commit = (runtime.schema_commit or runtime.source_commit or runtime.image_commit) if runtime else None
    if not run_commit or not validated or validated == "unknown":
        return None
    ours, theirs = validated.lower(), run_commit.lower()
    if ours.startswith(theirs) or theirs.startswith(ours):
        return None
    return (f"Validated against prime-rl {ours[:12]} ({check}), but the run uses {theirs[:12]}: changes between them "
            "are unchecked (validating with schema prime, i.e. prime train validate, checks the run's commit).")


def _choose_gpu(ctx: Context, args: PlanRunInput, toml_gpu: str | None, owner: Owner, model: str | None,
                warnings: list[str],
                volume: VolumeFit | None = None) -> tuple[str | None, str, float | None, str | None]:
    """(gpu_type, how it was chosen, USD per GPU-hour or None, why the price is unknown). With a ``volume``, only
    the GPU types its cluster serves: a default is chosen among them, a named one that does not fit is an error."""
    platform = ctx.platform()
    catalogue = platform.list_models(team_id=owner.team_id)
    allowed = platform.list_gpu_types(team_id=owner.team_id).gpu_types
    prices = {g.gpu_type: g for g in catalogue.on_demand}
    model_gpus: list[str] | None = None
    listed = next((m for m in catalogue.models if m.name == model), None)
    if listed is not None:
        model_gpus = sorted({c.gpu_type for c in listed.clusters if c.gpu_type})
    elif model and catalogue.models:
        warnings.append(f"Model {model} is not in the platform's list of trainable models for this owner "
                        "(list-models); the platform may refuse the run.")
    chosen = args.gpu_type or toml_gpu
    if chosen:
        how = "argument" if args.gpu_type else "config (gpu_type)"
        code: ErrorCode = "bad_arguments" if args.gpu_type else "invalid_config"
        if volume is not None and volume.gpu_types and chosen not in volume.gpu_types:
            again = plan_again(args, gpu_type=volume.gpu_types[0])
            raise fail(code, f"Volume {volume.name} is on cluster {volume.cluster or volume.cluster_id}, which serves "
                       f"{', '.join(volume.gpu_types)}, not {chosen}: a run uses the GPUs of its volume's cluster.",
                       f"Plan with a GPU type that fits ({again}), or without the volume.", next_calls=[again])
        if allowed and chosen not in allowed:
            again = plan_again(args, gpu_type=allowed[0])
            raise fail(code, f"GPU type {chosen} is not available to the {owner.label}; available: "
                       f"{', '.join(allowed)}.", f"Pick one of those and plan again, e.g. {again}.",
                       next_calls=[again])
    elif reserved := [g for g in allowed if g not in prices and (model_gpus is None or g in model_gpus)
                      and (volume is None or not volume.gpu_types or g in volume.gpu_types)]:
        # The platform places a run sent without a GPU type on the team's reservation first (the emulator's
        # placement, modelled on it; `prime train run` sends none): the plan does what it would, and says so.
        chosen = reserved[0]
        how = ("default: the owner's reserved capacity, which the platform uses first for a run sent without a GPU "
               "type (as prime train run sends it); name an on-demand type to choose")
        others = [g.gpu_type for g in catalogue.on_demand if g.price_per_gpu_hour is not None]
        if others:
            warnings.append(f"The run goes on the reserved {chosen} capacity (no on-demand price: the reservation "
                            f"pays for it); on demand it could run on {', '.join(others)}, billed per GPU-hour.")
    else:
        candidates = [g for g in catalogue.on_demand if g.price_per_gpu_hour is not None
                      and (not allowed or g.gpu_type in allowed) and (model_gpus is None or g.gpu_type in model_gpus)
                      and (volume is None or not volume.gpu_types or g.gpu_type in volume.gpu_types)]
        candidates.sort(key=lambda g: (not g.available_now, g.price_per_gpu_hour))
        if not candidates:
            warnings.append("No priced on-demand GPU type found for this owner and model; the platform picks "
                            "the GPU type (price unknown). Name a GPU type to choose.")
            return None, "platform default (none sent)", None, "price per GPU-hour: the platform picks the GPU type."
        chosen = candidates[0].gpu_type
        fitting = f" that volume {volume.name}'s cluster serves" if volume is not None and volume.gpu_types else ""
        how = f"default: the cheapest on-demand type for this owner{fitting}" + (
            "" if candidates[0].available_now else " (none is marked available now)") + "; name one to choose"
        reserved = [g for g in allowed if g not in prices]
        if reserved:
            warnings.append(f"This owner also has GPU types without an on-demand price ({', '.join(reserved)}, "
                            "e.g. reserved capacity); name one as the GPU type to use it.")
    if model_gpus is not None and chosen not in model_gpus:
        warnings.append(f"Model {model} is not cached on {chosen} clusters (listed on: "
                        f"{', '.join(model_gpus) or 'none'}); the platform may refuse the run.")
    entry = prices.get(chosen)
    price = entry.price_per_gpu_hour if entry else None
    why = None if price is not None else (f"price per GPU-hour: {chosen} has no on-demand price for the "
                                          f"{owner.label} (reserved capacity, or not offered on demand).")
    if chosen in allowed and chosen not in prices:
        why = (f"price per GPU-hour: {chosen} is the {owner.label}'s reserved capacity (no on-demand price; the "
               "reservation pays for it, not a per-GPU-hour bill).")
    return chosen, how, price, why


@dataclass
class VolumeFit:
    """A volume and the GPU types its cluster serves (``gpu_types`` empty: not known from the catalogue)."""

    name: str
    cluster_id: str | None
    cluster: str | None
    gpu_types: list[str]


def _check_volume(ctx: Context, volume: str, owner: Owner, warnings: list[str]) -> VolumeFit:
    """GET /training/volumes: the volume must exist for the owner. Unlike ``prime train`` (which
    creates a missing volume, 5Ti by default), planning never creates one: a volume is a billed,
    lasting resource outside the plan the person approves. The error names the command instead.
    Returns the GPU types of the volume's cluster: the catalogue's clusters (GET
    /training/available-fft-models ``models[].clusters[]`` ``clusterId`` -> ``gpuType``) with its ``clusterId``."""
    volumes = ctx.platform().list_volumes(team_id=owner.team_id)
    found = next((v for v in volumes if v.name == volume), None)
    if found is None:
        names = ", ".join(v.name for v in volumes) or "none"
        listing = call("mf_list_volumes", team=owner.team_id or "personal")
        raise fail("volume_not_found", f"The {owner.label} has no volume named {volume!r} (volumes: {names}).",
                   f"Use an existing volume ({listing}), or ask the user to create it with the prime CLI "
                   f"(`prime volumes create {volume}`, needs the prime CLI); model-factory does not create volumes. "
                   "Or plan without a volume.", next_calls=[listing])
    if (found.status or "").upper() != "RUNNING":
        warnings.append(f"Volume {volume} is {found.status or 'in an unknown state'}, not RUNNING yet.")
    models = ctx.platform().list_models(team_id=owner.team_id).models
    types = sorted({c.gpu_type for m in models for c in m.clusters if c.gpu_type and found.cluster_id
                    and c.cluster_id == found.cluster_id})
    if not types:
        warnings.append(f"Which GPU types volume {volume}'s cluster ({found.cluster or found.cluster_id or 'unknown'}) "
                        "serves is not in the platform's catalogue; a run uses the GPUs of its volume's cluster.")
    return VolumeFit(name=volume, cluster_id=found.cluster_id, cluster=found.cluster, gpu_types=types)


def plan_again(args: PlanRunInput, **changes: Any) -> Call:
    """The ``mf_plan_run`` call with ``args`` (defaults left out) and ``changes`` (None removes one)."""
    arguments = {**args.model_dump(exclude_defaults=True), **changes}
    return call("mf_plan_run", **arguments)


def build_plan(args: PlanRunInput, ctx: Context, plan_id: str, *, prepare: bool) -> Draft:

    """Compute the plan for ``args`` (see the module docstring). ``prepare`` calls POST
    /training/runs/prepare (plan time only; its answer is information, not hashed).

    Raises ToolFailure: ``secret_in_input``, ``config_not_found``, ``invalid_toml``,
    ``invalid_config``, ``bad_arguments``, ``env_file_invalid``, ``unsupported_secret``,
    ``secret_not_set``, ``invalid_context``, ``invalid_team``, ``owner_ambiguous``,
    ``volume_not_found``; PlatformError from the reads.
    """
    known = ctx.scrubber.known_values()
    secret_detection.refuse_secret_values(args.model_dump(exclude_none=True), root="arguments", known_values=known)
    if args.name is not None:
        refuse_credential_name(args.name, "The name argument", "name")
    path, _ = configs.resolve_config(args.config_path, ctx)  # a path, or a bundled example id
    data, raw = configs.read_config(path)
    if args.source_ref is not None and (problem := configs.source_ref_problem(args.source_ref)):
        raise fail("bad_arguments", f"source_ref argument: {problem}",
                   "Use a branch, tag or 40-hex commit sha of prime-rl as the source ref, then plan again.")
    files = secret_detection.toml_env_files(raw, path) + [ctx.resolve_path(p) for p in args.env_files]
    for env_file in files:
        ctx.scrubber.add_env_file(env_file, ctx.env)
    secret_detection.refuse_secret_values(raw, root=path.name, known_values=ctx.scrubber.known_values(),
                                          check_key_names=True)
    report = configs.validate_read(path, data, ctx)  # the bytes hashed below; schema auto, as validate-config
    if report.valid is False:
        problems = "; ".join(f"{e.path or '(file)'}: {e.message}" for e in report.errors[:5])
        more = f" (+{len(report.errors) - 5} more)" if len(report.errors) > 5 else ""
        check, again = call("mf_validate_config", config_path=str(path)), plan_again(args)
        raise fail("invalid_config", f"{path} would be refused: {problems}{more}",
                   f"Fix the config ({check} lists every problem), then plan again: {again}.",
                   fields=[FieldProblem(path=e.path, problem=e.message) for e in report.errors],
                   next_calls=[check, again])
    if report.valid is None:  # only our rules ran (the snapshot failed): nothing says the platform would accept it
        check, again = call("mf_validate_config", config_path=str(path), schema="real"), plan_again(args)
        raise fail("invalid_config", f"{path} was not judged by a schema: {report.schema_note}",
                   f"Check it with prime-rl's own schema ({check}), then plan again: {again}.",
                   next_calls=[check, again])
    if report.gpu_count is None:
        again = plan_again(args)
        raise fail("invalid_config", f"Cannot tell how many GPUs {path} needs: {report.gpu_count_detail}",
                   f"Set the [deployment] counts explicitly, then plan again: {again}.", next_calls=[again])
    toml_strings = {k: raw.get(k) for k in configs.CLI_OPTIONS}
    warnings: list[str] = [f"{w.path}: {w.message}" for w in report.warnings if w.rule != "no_max_steps"]
    warnings += [w for p in args.env_files if (w := secret_detection.env_file_git_warning(ctx.resolve_path(p)))]
    mode: Literal["rl", "sft"] = report.mode
    hosted, _ = configs.hosted_config(raw)  # deprecated keys translated as prime train does (warned above)
    given = {ctx.resolve_path(p): p for p in args.env_files}

    def without(env_file: Path) -> Call | None:
        if env_file not in given:
            return None
        return plan_again(args, env_files=[p for p in args.env_files if p != given[env_file]] or None)

    names = forwarded_names(args.secrets, ctx, files, warnings, plan_again(args), without)

    from_config = report.max_steps
    cap: int | None
    if args.max_steps is not None:
        cap, reason = args.max_steps, "explicit max_steps argument"
    elif args.run_kind == "smoke":
        cap = SMOKE_MAX_STEPS if from_config is None else min(from_config, SMOKE_MAX_STEPS)
        reason = (f"smoke run: min(config {from_config if from_config is not None else 'unset'}, "
                  f"{SMOKE_MAX_STEPS}); for more, plan with --run-kind full or --max-steps N")
    else:
        cap = from_config
        reason = "full run: the config's max_steps" if cap is not None else \
            "full run and the config sets no max_steps: the run continues until stopped"
    apply_step_cap(hosted, cap)

    settings = ctx.settings
    if settings.context_error:
        raise fail("invalid_context", f"The prime context could not be applied: {settings.context_error}",
                   "Fix PRIME_CONTEXT (or the context file) so the owner and URLs are the intended ones, then plan "
                   "again.")
    if settings.config_error:
        warnings.append(f"The prime config file was ignored ({settings.config_error}); its team is not applied.")
    owner = resolve_owner(ctx, args.team, strict=True, retry=plan_again(args, team=None))

    file_sha256 = hashlib.sha256(data).hexdigest()
    acknowledged = parse_plan_ids(args.acknowledge_unresolved)
    account = ctx.account_id()
    unresolved = check_unresolved(ctx, ctx.store(), plan_id=plan_id, team_id=owner.team_id, account_id=account,
                                  file_sha256=file_sha256, acknowledged=acknowledged, config_path=str(path),
                                  planning=prepare)
    model = report.model_name
    volume = args.volume or toml_strings["volume"]
    fit = _check_volume(ctx, volume, owner, warnings) if volume else None
    gpu_type, gpu_how, price, why = _choose_gpu(ctx, args, toml_strings["gpu_type"], owner, model, warnings, fit)
    count = report.gpu_count
    if toml_strings["volume_size"]:
        warnings.append("volume_size is ignored: model-factory attaches existing volumes only.")
    image_tag = args.image_tag or toml_strings["image_tag"]
    source_ref = args.source_ref or toml_strings["source_ref"]
    runtime = None
    if prepare and mode == "sft" and any(key in raw for key in configs.SFT_ONLINE_EVAL_KEYS):
        runtime = RuntimeInfo(local_validation="skipped", note="local validation skipped, as prime train run skips "
                              "it for an SFT config with online-eval blocks; the platform validates it on submission.")
    elif prepare:
        runtime = _prepare(ctx, mode, owner, image_tag, source_ref, warnings)
    if mismatch := _schema_mismatch(report.schema_check, report.schema_commit, runtime):
        warnings.append(mismatch)
    cost = estimate_cost(mode, count, price, cap, args.seconds_per_step, why)
    warnings += magnitude_warnings(cost)
    for imported in ctx.store().imported:
        warnings.append(imported.words())
    policy = load_for_context(ctx)
    if problem := policy.problem:
        warnings.append(f"The budget policy is not used: {problem} Launches need a person's approval until the "
                        "person fixes it.")
    spend_cap = policy.limits.spend_cap_usd_per_run if policy.limits else None
    if spend_cap is not None and (capped := cap_warning(spend_cap, f"spend_cap_usd_per_run of {policy.path}", cost)):
        warnings.append(capped)

    base = args.name or (raw["name"] if isinstance(raw.get("name"), str) and raw["name"] else None)
    if base is None:
        base = file_run_name(path)
        refuse_credential_name(base, "The config file's name, which gives the run name here,")
    fp = fingerprint(plan_id)
    run_name = f"{base}-{fp}"
    if report.wandb_project is not None and "WANDB_API_KEY" not in names:
        warnings.append("The config logs to Weights & Biases but WANDB_API_KEY is not forwarded; the run may "
                        "fail to log. Forward it by name (WANDB_API_KEY among the secrets; the user exports it or "
                        "puts it in an env file).")
    draft = Draft(
        plan_id=plan_id, args=args, config_path=path, file_sha256=file_sha256, hosted=hosted,
        mode=mode, model=model, owner=owner, gpu_type=gpu_type, gpu_type_source=gpu_how, gpu_count=count, cost=cost,
        config_max_steps=from_config, max_steps=cap, max_steps_reason=reason, secret_names=sorted(names),
        env_files=files, volume=volume, image_tag=image_tag, source_ref=source_ref, run_name=run_name,
        fingerprint=fp, runtime=runtime, warnings=warnings, unresolved=unresolved, account_id=account,
        validation=Validation(schema_check=report.schema_check, schema_commit=report.schema_commit,
                              schema_source=report.schema_source, schema_interpreter=report.schema_interpreter,
                              fallback_from=report.fallback_from))
    draft.material = {
        "action": "launch", "platform_url": ctx.settings.base_url, "account_id": account,
        "config_sha256": config_sha256(hosted), "file_sha256": draft.file_sha256,
        "team_id": owner.team_id, "gpu_type": gpu_type, "gpu_count": count, "volume": volume,
        "source_ref": source_ref, "image_tag": image_tag, "secret_names": draft.secret_names, "max_steps": cap,
        "mode": mode, "name": run_name,
        "cost": {"usd_per_gpu_hour": price, "usd_low": cost.usd_low, "usd_expected": cost.usd_expected,
                 "usd_high": cost.usd_high},
    }
    if acknowledged:  # only then: plans that acknowledge nothing keep the hashes they always had
        draft.material["acknowledged_unresolved"] = acknowledged
    draft.plan_hash = plan_hash(draft.material)
    return draft


def summary_text(d: Draft, *, policy: str | None = None, policy_reasons: list[str] | None = None) -> str:
    """The plan for a person: every fact a launch decision needs, unknowns shown as unknown; when
    the budget policy file ``policy`` covers the plan (``policy_reasons``: the checks it passed),
    the approval line says the agent may launch it without a code. Each
    line is escaped (:func:`tools.guardrails.text.shown`): whatever a field holds (a config path
    with a newline, a platform's text), it stays on its own line and moves no cursor."""
    c = d.cost
    account = f" {d.account_id}" if d.owner.team_id is None and d.account_id else ""  # whose personal account
    owner = f"{d.owner.label}{account} (from {d.owner.source})" + (f". Note: {d.owner.note}" if d.owner.note else "")
    gpu = f"{d.gpu_type or 'chosen by the platform'} x {d.gpu_count} ({d.gpu_type_source})"
    price = (f"{usd_per_gpu_hour(c.usd_per_gpu_hour)} -> {usd_per_hour(c.usd_per_hour)}"
             if c.usd_per_gpu_hour is not None else "unknown per GPU-hour")
    cost = f"low {usd(c.usd_low)} / expected {usd(c.usd_expected)} / high {usd(c.usd_high)}"
    if c.hours_expected is not None:
        cost += " (~" + "/".join(duration(h * 3600) for h in (c.hours_low, c.hours_expected, c.hours_high)
                                 if h is not None) + ")"
    runtime = d.runtime.note if d.runtime else "runtime not re-checked"
    lines = [
        f"Plan {d.plan_id}: nothing launched, nothing spent yet.",
        *unresolved_lines(d.unresolved),
        f"  Owner (pays):  {owner}",
        f"  Config:        {d.config_path} (file sha256 {d.file_sha256[:12]}; config as sent, sha256 "
        f"{d.config_sha256[:12]})",
        f"  Model / mode:  {d.model or 'unknown'} / {d.mode.upper()}",
        f"  Validated:     {d.validation.words()}",
        f"  Run name:      {d.run_name} (-{d.fingerprint} marks this plan, to find a launch whose answer is lost)",
        *_config_name_line(d),
        f"  GPUs:          {gpu}",
        f"  Price:         {price}",
        f"  Steps:         {f'{d.max_steps:,}' if d.max_steps is not None else 'no limit'} ({d.max_steps_reason})",
        f"  Cost estimate: {cost}",
        f"  Assumptions:   {c.assumptions}",
    ]
    lines += [f"  Unknown:       {u}" for u in c.unknown]
    secrets = (", ".join(d.secret_names) + " (by name; values read only at dispatch)") if d.secret_names \
        else "none forwarded"
    lines += [
        f"  Secrets:       {secrets}",
        f"  Volume:        {d.volume or 'none (no checkpoint download without one)'}",
        f"  prime-rl:      image {d.image_tag or 'platform default'}, source ref {d.source_ref or 'none'}; {runtime}",
    ]
    if d.warnings:
        lines.append("  Warnings:")
        lines += [f"    - {w}" for w in d.warnings]
    if policy:
        lines.append(f"  Approval:      NOT NEEDED FROM YOU: the budget policy {policy} covers this plan "
                     f"({'; '.join(policy_reasons or [])}), so the agent may launch it now without a code.")
    else:
        lines.append(f"  Approval:      valid {APPROVAL_TTL_SECONDS // 60} minutes, this exact plan, once; any change "
                     "voids it.")
    return "\n".join(shown(line) for line in lines)  # a field holding a control character cannot fake a line
