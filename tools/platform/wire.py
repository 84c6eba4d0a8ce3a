"""Wire models of the Model Factory API and the traces host, plus the request-body builders.

Every model tolerates what a newer or older server may send: unknown keys are kept
(``extra="allow"``, read them with ``model.model_extra``), optional fields accept
``null``, and ``status`` fields stay plain strings so unknown values survive. Platform
models use camelCase wire keys (aliases) and snake_case attributes; ``populate_by_name``
lets both spellings in. Models whose wire keys are snake_case say so.

Sources: reference/prime-api.md §2.2-2.7 (platform), §4 (prepare), §5 (monitoring),
§6.6 (traces SDK 0.0.10 models), §3.5 (create body), and ``prime_cli/api/{rl,training,
billing}.py`` / ``prime_traces/models.py``. Units: seconds, bytes, USD; prices are USD per
GPU-hour, usage pricing is USD per million tokens.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    model_validator,
)
from pydantic.alias_generators import to_camel


class WireModel(BaseModel):
    """Base of snake_case wire models: extra keys kept."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, defer_build=True)


class CamelWireModel(BaseModel):
    """Base of camelCase wire models: ``field_name`` <-> ``fieldName``; extra keys kept."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, alias_generator=to_camel, defer_build=True)


# --------------------------------------------------------------------------------------
# Runs (§2.2, §2.3, §5)
# --------------------------------------------------------------------------------------


class RunStatus:
    """Run status values known to ``prime`` 0.18.0 (its colour map), and the terminal set.

    The server may send others; they are kept as strings. Terminal for the CLI (stop
    polling ends there): ``STOPPED``, ``FAILED``, ``COMPLETED``, ``PAUSED``, compared
    after upper-casing. Source: reference §2.2.
    """

    QUEUED = "QUEUED"
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    STOPPED = "STOPPED"
    PAUSING = "PAUSING"
    PAUSED = "PAUSED"
    KNOWN = frozenset({QUEUED, PENDING, RUNNING, COMPLETED, FAILED, STOPPED, PAUSING, PAUSED})
    TERMINAL = frozenset({STOPPED, FAILED, COMPLETED, PAUSED})

    @classmethod
    def is_terminal(cls, status: str | None) -> bool:
        """True when ``status`` (any case) is one the CLI treats as final."""
        return bool(status) and str(status).upper() in cls.TERMINAL

    @classmethod
    def is_known(cls, status: str | None) -> bool:
        """True when ``status`` (any case) is one of the eight values the CLI knows."""
        return bool(status) and str(status).upper() in cls.KNOWN


class FailureAnalysis(CamelWireModel):
    """``failureAnalysis`` of a FAILED run: ``rootCause``, ``evidence[]``, ``confidence`` (0..1)."""

    root_cause: str | None = None
    evidence: list[str] = Field(default_factory=list)
    confidence: float | None = None

    @model_validator(mode="before")
    @classmethod
    def _null_lists(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("evidence") is None:
            data = {**data, "evidence": []}
        return data


class RLRun(CamelWireModel):
    """A Hosted Training run (the ``run`` object of GET/PUT ``/rft/runs/{id}``, items of the list).

    Only ``id`` and ``status`` are required here (the CLI also requires ``userId``,
    ``createdAt``, ``updatedAt``). ``kind``: ``SHARED_RFT_HOSTED`` | ``DEDICATED_FULL_FT`` |
    ``EXTERNAL``. ``loss == "sft"`` marks SFT runs. ``volume_name`` is set only on the
    detail read. ``gpu_count`` is trainer + inference GPUs. Source: reference §2.2.
    """

    id: str
    status: str
    name: str | None = None
    user_id: str | None = None
    team_id: str | None = None
    rft_cluster_id: str | None = None
    prime_cluster_id: str | None = None
    kind: str | None = None
    rollouts_per_example: int | None = None
    seq_len: int | None = None
    max_steps: int | None = None
    max_tokens: int | None = None
    batch_size: int | None = None
    loss: str | None = "rl"
    teacher: dict[str, Any] | None = Field(
        default=None, validation_alias=AliasChoices("teacher", "teacherConfig"), serialization_alias="teacher"
    )
    base_model: str | None = None
    environments: list[dict[str, Any]] = Field(default_factory=list)
    run_config: dict[str, Any] | None = None
    eval_config: dict[str, Any] | None = None
    val_config: dict[str, Any] | None = None
    buffer_config: dict[str, Any] | None = None
    learning_rate: float | None = None
    lora_alpha: int | None = None
    max_inflight_rollouts: int | None = None
    oversampling_factor: float | None = None
    max_async_level: int | None = None
    volume_name: str | None = None
    gpu_count: int | None = None
    wandb_entity: str | None = None
    wandb_project: str | None = None
    wandb_run_name: str | None = None
    runs_ahead: int | None = None
    queue_reason: str | None = None
    notice: str | None = None
    started_at: datetime | None = None
    completed_at: datetime | None = None
    error_message: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    failure_analysis: FailureAnalysis | None = None
    source_commit: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _null_lists(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("environments", []) is None:
            data = {**data, "environments": []}
        return data

    def is_terminal(self) -> bool:
        """True when the status is one the CLI treats as final (see :class:`RunStatus`)."""
        return RunStatus.is_terminal(self.status)

    @property
    def is_sft(self) -> bool:
        """True for SFT runs (``loss == "sft"``)."""
        return (self.loss or "").lower() == "sft"

    def environment_labels(self) -> list[str]:
        """One label per environment: the first of ``slug``, ``name``, ``id``, ``taskset.id``, else ``env-<i>``."""
        labels = []
        for index, env in enumerate(self.environments):
            taskset = env.get("taskset")
            taskset = taskset if isinstance(taskset, dict) else {}
            label = env.get("slug") or env.get("name") or env.get("id") or taskset.get("id")
            labels.append(str(label) if label else f"env-{index}")
        return labels


class UnreadableRow(BaseModel):
    """A row of a list answer that does not have its model's shape, left out of the list.

    ``index``: its 0-based position in the answer's list; ``id`` and ``name``: the row's own, when
    they are strings (else ``None``); ``problem``: the fields that failed and why (pydantic's
    messages, never the row's values).
    """

    index: int
    id: str | None = None
    name: str | None = None
    problem: str

    def words(self, what: str = "row") -> str:
        """``row 3 (id r1): status: Input should be a valid string`` (1-based position)."""
        named = f" (id {self.id})" if self.id else ""
        return f"{what} {self.index + 1}{named}: {self.problem}"


def _readable_rows(model: type[BaseModel], rows: Any) -> tuple[list[Any], list[UnreadableRow]]:
    """``rows`` split into the ones ``model`` reads and the others (:class:`UnreadableRow`)."""
    good: list[Any] = []
    bad: list[UnreadableRow] = []
    for index, row in enumerate(rows):
        try:
            good.append(model.model_validate(row))
        except ValidationError as exc:
            problem = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'the row'}: {e['msg']}"
                                for e in exc.errors(include_input=False, include_url=False)[:3])
            keep = row if isinstance(row, dict) else {}
            bad.append(UnreadableRow(index=index, id=keep.get("id") if isinstance(keep.get("id"), str) else None,
                                     name=keep.get("name") if isinstance(keep.get("name"), str) else None,
                                     problem=problem))
    return good, bad


class RLRunPage(WireModel):
    """GET ``/rft/runs``: ``{runs[], total?, page?, limit?, total_pages?}`` (paging keys snake_case).

    ``total is None`` means an old backend that ignored paging and returned every run. Read row by
    row: a run row of the wrong shape (``status: null``, ``gpuCount: "eight"``, not an object) is
    left out of ``runs`` and listed in ``unreadable`` (so one bad row hides no other run); a caller
    that must see every run (a lost launch, a policy's count of active runs) checks ``unreadable``.
    """

    runs: list[RLRun] = Field(default_factory=list)
    total: int | None = None
    page: int | None = None
    limit: int | None = None
    total_pages: int | None = None
    unreadable: list[UnreadableRow] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _row_by_row(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("runs"), list):
            runs, unreadable = _readable_rows(RLRun, data["runs"])
            data = {**data, "runs": runs, "unreadable": unreadable}
        elif isinstance(data, dict) and data.get("runs", []) is None:
            data = {**data, "runs": []}
        return data


class RLCheckpoint(CamelWireModel):
    """A checkpoint (GET ``/rft/runs/{id}/checkpoints``). ``status``: READY | PENDING | UPLOADING | FAILED | ..."""

    id: str
    step: int | None = None
    status: str | None = None
    rft_run_id: str | None = None
    storage_url: str | None = None
    size_bytes: int | None = None
    created_at: datetime | None = None
    uploaded_at: datetime | None = None


class EnvServerInfo(WireModel):
    """An environment-server pod (snake_case wire keys). ``status`` is the k8s phase text."""

    pod_name: str
    status: str | None = None
    env_name: str | None = None
    env_index: int | None = None


class RunLogs(WireModel):
    """GET ``/rft/runs/{id}/logs`` or ``/env-server-logs``: ``{logs}``, newline-separated lines."""

    logs: str = ""

    @model_validator(mode="before")
    @classmethod
    def _null_logs(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("logs", "") is None:
            data = {**data, "logs": ""}
        return data

    def lines(self) -> list[str]:
        """The log lines (plain text or JSON objects as text)."""
        return self.logs.splitlines()


class RunMetrics(WireModel):
    """GET ``/rft/runs/{id}/metrics``: ``{metrics: [record]}``; records pass through as dicts.

    Records are flat objects with ``step`` and numeric keys like ``reward/all/mean``
    (schema not pinned by the CLI, reference §5.7 / §9).
    """

    metrics: list[dict[str, Any]] = Field(default_factory=list)


class RunProgress(CamelWireModel):
    """GET ``/rft/runs/{id}/progress``: latest step and the steps that have samples / distributions."""

    latest_step: int | None = None
    steps_with_samples: list[int] = Field(default_factory=list)
    steps_with_distributions: list[int] = Field(default_factory=list)
    last_updated_at: str | None = None


class RolloutSamples(WireModel):
    """GET ``/rft/runs/{id}/samples`` (snake_case): one page of rollout samples of one step."""

    run_id: str | None = None
    samples: list[dict[str, Any]] = Field(default_factory=list)
    total: int = 0
    page: int | None = None
    limit: int | None = None
    total_pages: int = 0


class RunDistribution(WireModel):
    """GET ``/rft/runs/{id}/distributions``: histogram bins of one step.

    ``bins`` is the wire ``bins``, else ``chartData.histogramData`` (or ``chart_data``),
    else ``[]`` - as the CLI does (reference §5.9). Bin items seen: ``{binStart, binEnd, count, range}``.
    """

    bins: list[dict[str, Any]] = Field(default_factory=list)
    step: int | None = None

    @model_validator(mode="before")
    @classmethod
    def _resolve_bins(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("bins") is None:
            chart = data.get("chartData") or data.get("chart_data")
            bins = chart.get("histogramData") if isinstance(chart, dict) else None
            data = {**data, "bins": bins or []}
        return data


class PauseResult(CamelWireModel):
    """POST ``/training/runs/{id}/pause``: at least ``status`` (e.g. ``PAUSING``)."""

    status: str | None = None
    run_id: str | None = None


# --------------------------------------------------------------------------------------
# Hosted training create / prepare / catalogue (§2.4, §4)
# --------------------------------------------------------------------------------------


class HostedRunCreated(CamelWireModel):
    """POST ``/training/runs`` or ``/training/runs/{id}/resume``.

    ``token_value`` is the per-run API token: a secret, never shown. The placement fields
    come only from newer backends and only for on-demand runs: ``price_per_gpu_hour`` (USD
    per GPU-hour), ``estimated_cost_per_hour`` (USD per hour for the whole run).
    """

    run_id: str
    token_value: SecretStr | None = Field(default=None, repr=False)
    on_demand: bool = False
    gpu_type: str | None = None
    price_per_gpu_hour: float | None = None
    estimated_cost_per_hour: float | None = None
    is_beta: bool = False

    @model_validator(mode="before")
    @classmethod
    def _null_flags(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            for key in ("onDemand", "isBeta", "on_demand", "is_beta"):
                if key in data and data[key] is None:
                    data[key] = False
        return data


class PreparedRuntime(WireModel):
    """``runtime`` of the prepare answer: image repository, digest and commits (snake_case)."""

    repository: str | None = None
    digest: str | None = None
    image_commit: str | None = None
    source_commit: str | None = None
    schema_commit: str | None = None


class SchemaInstall(WireModel):
    """``schema_install`` of the prepare answer: how to build the prime-rl schema env."""

    python: str | None = None
    requirements: list[str] = Field(default_factory=list)
    constraints: list[str] = Field(default_factory=list)


class LocalValidationPreparation(WireModel):
    """POST ``/training/runs/prepare`` (snake_case). Source: reference §4.

    Parsed leniently; :meth:`contract_problems` lists what the CLI's strict model would reject.
    """

    contract_version: int | None = None
    mode: str | None = None
    runtime: PreparedRuntime | None = None
    schema_install: SchemaInstall | None = None
    submission_supported: bool = False

    def contract_problems(self) -> list[str]:
        """Violations of the CLI's strict contract (empty list = usable for local compile)."""
        import re

        hex40 = re.compile(r"^[0-9a-f]{40}$")
        problems: list[str] = []
        if self.contract_version != 1:
            problems.append(f"contract_version must be 1, got {self.contract_version!r}")
        if self.mode not in ("rl", "sft"):
            problems.append(f"mode must be 'rl' or 'sft', got {self.mode!r}")
        rt = self.runtime
        if rt is None:
            problems.append("runtime is missing")
        else:
            if rt.repository != "ghcr.io/primeintellect-ai/prime-rl":
                problems.append(f"runtime.repository is {rt.repository!r}")
            if not re.match(r"^sha256:[0-9a-f]{64}$", rt.digest or ""):
                problems.append("runtime.digest is not sha256:<64 hex>")
            for name in ("image_commit", "schema_commit"):
                if not hex40.match(getattr(rt, name) or ""):
                    problems.append(f"runtime.{name} is not a 40-hex commit")
            if rt.source_commit is not None and not hex40.match(rt.source_commit):
                problems.append("runtime.source_commit is not a 40-hex commit")
            expected = rt.source_commit or rt.image_commit
            if rt.schema_commit and expected and rt.schema_commit != expected:
                problems.append("runtime.schema_commit does not match the selected runtime")
        if self.schema_install is None:
            problems.append("schema_install is missing")
        elif self.schema_install.python != "3.12":
            problems.append(f"schema_install.python must be '3.12', got {self.schema_install.python!r}")
        return problems


class FFTModelCluster(CamelWireModel):
    """A cluster that has the model cached: ``clusterId``, ``clusterName``, ``gpuType?``, ``cacheSyncedAt?``."""

    cluster_id: str | None = None
    cluster_name: str | None = None
    gpu_type: str | None = None
    cache_synced_at: str | None = None


class FFTModel(CamelWireModel):
    """A model cached for full fine-tuning on reserved capacity."""

    name: str
    clusters: list[FFTModelCluster] = Field(default_factory=list)


class OnDemandGpu(CamelWireModel):
    """A GPU type on shared on-demand capacity, billed at ``price_per_gpu_hour`` USD per GPU-hour.

    ``available_now`` is a coarse capacity hint, not a promise that a run starts now.
    """

    gpu_type: str
    price_per_gpu_hour: float | None = None
    discount_label: str | None = None
    available_now: bool = False
    is_beta: bool = False


class AvailableModels(CamelWireModel):
    """GET ``/training/available-fft-models``: ``{models[], onDemand[]?, onDemandBetaAccess?}``.

    ``on_demand_beta_access``: ``None`` = unknown (never a denial), ``False`` = not enrolled.
    """

    models: list[FFTModel] = Field(default_factory=list)
    on_demand: list[OnDemandGpu] = Field(default_factory=list)
    on_demand_beta_access: bool | None = None


class GpuTypes(CamelWireModel):
    """GET ``/training/available-gpu-types``: ``{gpuTypes: [str]}`` (e.g. ``H200_141GB``)."""

    gpu_types: list[str] = Field(default_factory=list)


class Volume(CamelWireModel):
    """A named volume (GET/POST ``/training/volumes``). Source: reference §2.5.

    ``status``: ``RUNNING`` (created) | ``TERMINATING`` | ``TOMBSTONED`` | ``FAILED`` | other.
    ``size`` is a Kubernetes quantity string such as ``"5Ti"``; ``created_at`` is kept as sent.
    """

    name: str
    status: str | None = None
    cluster_id: str | None = None
    pvc_name: str | None = None
    size: str | None = None
    cluster: str | None = None
    created_by: str | None = None
    created_by_name: str | None = None
    created_by_email: str | None = None
    created_at: str | None = None


class VolumeList(WireModel):
    """GET ``/training/volumes``: ``{volumes: [Volume]}``."""

    volumes: list[Volume] = Field(default_factory=list)


class VolumeTransferRoute(CamelWireModel):
    """POST ``/training/volumes/{name}/transfer`` (prime 0.18.0 ``api/training.py`` ``VolumeTransferRoute``):
    where a get goes. ``via`` is ``"r2"`` (scoped S3 credentials for the volume's ``prefix`` in ``bucket`` at
    ``endpoint``, valid until ``expires_at``) or ``"session"`` (the caller's live read-write session, in
    ``session``; the CLI then copies over SSH). The two credential values are secrets (``SecretStr``).
    """

    via: str
    session: dict[str, Any] | None = None
    endpoint: str | None = None
    bucket: str | None = None
    prefix: str | None = None
    access_key_id: str | None = None
    secret_access_key: SecretStr | None = Field(default=None, repr=False)
    session_token: SecretStr | None = Field(default=None, repr=False)
    expires_at: str | None = None
    lease_id: str | None = None

    def complete(self) -> bool:
        """True for an ``r2`` route with everything a read needs (the checks of prime's ``_volume_reads``)."""
        return bool(self.via == "r2" and self.endpoint and self.bucket and self.prefix and self.prefix.endswith("/")
                    and self.access_key_id and self.secret_access_key)


# --------------------------------------------------------------------------------------
# Billing, teams, identity (§2.6, §2.7)
# --------------------------------------------------------------------------------------


class UsageBreakdown(WireModel):
    """Token counts and cost (USD) of one side of a run (snake_case)."""

    tokens: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0


class UsagePricing(WireModel):
    """Prices in USD per million tokens (snake_case)."""

    training_per_mtok: float | None = None
    inference_input_per_mtok: float | None = None
    inference_output_per_mtok: float | None = None


class RunUsage(WireModel):
    """GET ``/billing/runs/{id}/usage`` (snake_case): tokens and cost (USD) so far."""

    run_id: str
    run_name: str | None = None
    base_model: str | None = None
    status: str | None = None
    training: UsageBreakdown = Field(default_factory=UsageBreakdown)
    inference: UsageBreakdown = Field(default_factory=UsageBreakdown)
    total_tokens: int = 0
    total_cost_usd: float = 0.0
    record_count: int = 0
    pricing: UsagePricing = Field(default_factory=UsagePricing)

    @model_validator(mode="before")
    @classmethod
    def _null_parts(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = {k: v for k, v in data.items() if not (k in ("training", "inference", "pricing") and v is None)}
        return data


class Team(CamelWireModel):
    """A team the user belongs to: ``teamId``, ``name``, ``slug``, ``role`` (e.g. ADMIN/MEMBER), ``createdAt``."""

    team_id: str
    name: str | None = None
    slug: str | None = None
    role: str | None = None
    created_at: str | None = None


class TeamList(WireModel):
    """GET ``/user/teams``: ``{data: [Team], total_count}`` (``total_count`` snake_case)."""

    data: list[Team] = Field(default_factory=list)
    total_count: int | None = None
    offset: int | None = None
    limit: int | None = None


class WhoAmI(WireModel):
    """``data`` of GET ``/user/whoami``: ``id``, ``email``, ``name``, ``slug``, ``scope``, limits.

    ``scope`` maps a scope name to ``{read, write}`` or null.
    """

    id: str | None = None
    email: str | None = None
    name: str | None = None
    slug: str | None = None
    scope: dict[str, Any] | None = None
    account_limits: dict[str, Any] | None = None
    key_limits: dict[str, Any] | None = None


# --------------------------------------------------------------------------------------
# Traces host (§6.6; snake_case wire keys; every key is sent, some may be null)
# --------------------------------------------------------------------------------------


class TraceModelInfo(WireModel):
    """``model`` of a trace: ``provider?``, ``id?``."""

    provider: str | None = None
    id: str | None = None


class TraceScore(WireModel):
    """``score`` of a trace: ``reward`` (``None`` = unscored, not 0) and ``outcome``."""

    reward: float | None = None
    outcome: str | None = None


class TraceExecution(WireModel):
    """``execution`` of a trace: ``has_error``, ``is_truncated``."""

    has_error: bool | None = None
    is_truncated: bool | None = None


class TraceSummary(WireModel):
    """One trace's extracted columns (GET ``/traces``, ``/traces/{id}``).

    ``duration_ms`` milliseconds, ``size_bytes`` bytes. ``run_step`` and ``user_id`` are
    extra keys the CLI reads when present. The full document is the raw download.
    """

    trace_id: str
    upload_id: str | None = None
    episode_id: str | None = None
    created_at: datetime | None = None
    ingested_at: datetime | None = None
    run_id: str | None = None
    environment_id: str | None = None
    model: TraceModelInfo | None = None
    task_id: str | None = None
    agent_name: str | None = None
    score: TraceScore | None = None
    execution: TraceExecution | None = None
    duration_ms: int | None = None
    total_tokens: int | None = None
    size_bytes: int | None = None
    context: dict[str, Any] = Field(default_factory=dict)
    run_step: int | None = None
    user_id: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _null_context(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("context", {}) is None:
            data = {**data, "context": {}}
        return data


class TraceListPage(WireModel):
    """``{items: [TraceSummary], next_cursor}``; ``next_cursor`` ``None`` marks the last page."""

    items: list[TraceSummary] = Field(default_factory=list)
    next_cursor: str | None = None


class EpisodeError(WireModel):
    """``error`` of an episode: ``type?``, ``message?`` (the episode's own, not its traces')."""

    type: str | None = None
    message: str | None = None


class EpisodeSummary(WireModel):
    """One episode (GET ``/episodes``)."""

    episode_id: str
    upload_id: str | None = None
    schema_version: int | None = None
    created_at: datetime | None = None
    ingested_at: datetime | None = None
    run_id: str | None = None
    environment_id: str | None = None
    outcome: str | None = None
    has_error: bool | None = None
    error: EpisodeError | None = None


class EpisodeTraceAggregate(WireModel):
    """Roll-up over an episode's member traces (``total_duration_ms`` milliseconds)."""

    trace_count: int = 0
    total_tokens: int | None = None
    total_duration_ms: int | None = None
    any_trace_error: bool | None = None
    agent_names: list[str] = Field(default_factory=list)


class EpisodeDetail(EpisodeSummary):
    """GET ``/episodes/{id}``: the summary plus ``traces`` (member aggregate)."""

    traces: EpisodeTraceAggregate | None = None


class EpisodeListPage(WireModel):
    """``{items: [EpisodeSummary], next_cursor}``."""

    items: list[EpisodeSummary] = Field(default_factory=list)
    next_cursor: str | None = None


class RunSummary(WireModel):
    """Traces-host totals over one run's traces (GET ``/runs/{run_id}``; not the platform run).

    ``avg_reward`` covers scored traces only. ``context`` is the newest trace's map
    (``run_type`` ``eval`` | ``train`` | ``unknown``). Use ``trace_count`` /
    ``episode_count`` to check a download.
    """

    run_id: str
    first_trace_created_at: datetime | None = None
    last_trace_created_at: datetime | None = None
    last_trace_ingested_at: datetime | None = None
    trace_count: int = 0
    episode_count: int = 0
    avg_reward: float | None = None
    step_min: int | None = None
    step_max: int | None = None
    step_count: int = 0
    has_error: bool | None = None
    first_user_id: str | None = None
    environment_ids: list[str] = Field(default_factory=list)
    model_ids: list[str] = Field(default_factory=list)
    context: dict[str, Any] = Field(default_factory=dict)


class RunListPage(WireModel):
    """GET ``/runs`` (traces host): ``{items: [RunSummary], next_cursor}``."""

    items: list[RunSummary] = Field(default_factory=list)
    next_cursor: str | None = None


class RunStep(WireModel):
    """One training step of a run on the traces host."""

    step: int
    trace_count: int = 0
    episode_count: int = 0
    avg_reward: float | None = None


class RunStepList(WireModel):
    """GET ``/runs/{run_id}/steps``: every step, oldest first, not paginated (unknown run = empty)."""

    step_min: int | None = None
    step_max: int | None = None
    step_count: int = 0
    items: list[RunStep] = Field(default_factory=list)


class TraceSearchMatch(WireModel):
    """One search hit; offsets are zero-based code points, end exclusive."""

    trace_id: str
    upload_id: str | None = None
    generation: int | None = None
    episode_id: str | None = None
    node_idx: int | None = None
    role: str | None = None
    field: str | None = None
    representation: str | None = None
    match_start: int | None = None
    match_end: int | None = None
    excerpt: str | None = None
    excerpt_start: int | None = None


class TraceSearchCoverage(WireModel):
    """What a search could not see (first page only)."""

    examined_traces: int | None = None
    unindexed_trace_ids: list[str] = Field(default_factory=list)
    partial_index: bool | None = None


class TraceSearchPage(WireModel):
    """GET ``/runs/{run_id}/search``: ``{items, next_cursor, coverage?}`` (``coverage`` None = unknown)."""

    items: list[TraceSearchMatch] = Field(default_factory=list)
    next_cursor: str | None = None
    coverage: TraceSearchCoverage | None = None


# --------------------------------------------------------------------------------------
# Request bodies (§3.4, §3.5, §4, §2.1 row 27)
# --------------------------------------------------------------------------------------

#: Request-body keys whose values are secrets (never logged, never in error messages).
SECRET_BODY_KEYS = frozenset({"wandbApiKey", "hfToken", "tokenValue"})


def build_create_body(
    config: Mapping[str, Any],
    *,
    mode: str | None = None,
    name: str | None = None,
    team_id: str | None = None,
    image_tag: str | None = None,
    wandb_api_key: str | None = None,
    hf_token: str | None = None,
    gpu_type: str | None = None,
    volume: str | None = None,
    source_ref: str | None = None,
    resume_from: str | None = None,
    normalized_config: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The POST ``/training/runs`` body exactly as ``prime`` 0.18.0 builds it (reference §3.5).

    Key order and presence as ``build_payload_from_toml``: ``config`` always; ``mode`` only
    for ``"sft"`` (``"rl"``/``None`` leave it out); ``name``, ``teamId``, ``imageTag``,
    ``wandbApiKey``, ``hfToken``, ``gpuType``, ``volume``, ``sourceRef`` only when
    non-empty (so no team = no ``teamId``); ``resumeFrom`` whenever not ``None``;
    ``normalizedConfig`` (the local-compile artifact) whenever not ``None``.

    ``config`` is the hosted TOML table (CLI-only keys already removed), sent as given.
    ``wandb_api_key`` / ``hf_token`` are secret *values*. Raises ``ValueError`` for an
    unknown ``mode``.
    """
    if mode not in (None, "rl", "sft"):
        raise ValueError(f"mode must be 'rl', 'sft' or None, got {mode!r}")
    body: dict[str, Any] = {"config": dict(config)}
    optional = (
        ("mode", mode if mode == "sft" else None),
        ("name", name),
        ("teamId", team_id),
        ("imageTag", image_tag),
        ("wandbApiKey", wandb_api_key),
        ("hfToken", hf_token),
        ("gpuType", gpu_type),
        ("volume", volume),
        ("sourceRef", source_ref),
    )
    for key, value in optional:
        if value:
            body[key] = value
    if resume_from is not None:
        body["resumeFrom"] = resume_from
    if normalized_config is not None:
        body["normalizedConfig"] = dict(normalized_config)
    return body


class CreateRunBody(BaseModel):
    """The create request as a value whose repr never shows a secret; :meth:`to_wire` gives the body.

    Fields mirror :func:`build_create_body`'s arguments; secrets are ``SecretStr``.
    """

    model_config = ConfigDict(extra="forbid")

    config: dict[str, Any]
    mode: str | None = None
    name: str | None = None
    team_id: str | None = None
    image_tag: str | None = None
    wandb_api_key: SecretStr | None = Field(default=None, repr=False)
    hf_token: SecretStr | None = Field(default=None, repr=False)
    gpu_type: str | None = None
    volume: str | None = None
    source_ref: str | None = None
    resume_from: str | None = None
    normalized_config: dict[str, Any] | None = None

    def to_wire(self) -> dict[str, Any]:
        """The exact JSON body (secret values revealed: send it, never print it)."""
        return build_create_body(
            self.config,
            mode=self.mode,
            name=self.name,
            team_id=self.team_id,
            image_tag=self.image_tag,
            wandb_api_key=self.wandb_api_key.get_secret_value() if self.wandb_api_key else None,
            hf_token=self.hf_token.get_secret_value() if self.hf_token else None,
            gpu_type=self.gpu_type,
            volume=self.volume,
            source_ref=self.source_ref,
            resume_from=self.resume_from,
            normalized_config=self.normalized_config,
        )


def build_prepare_body(
    mode: str, team_id: str | None, *, image_tag: str | None = None, source_ref: str | None = None
) -> dict[str, Any]:
    """The POST ``/training/runs/prepare`` body: ``{mode, teamId, imageTag?, sourceRef?}`` (reference §3.2 step 10, §4).

    ``mode`` is ``"rl"`` or ``"sft"`` (always sent); ``teamId`` is always present, ``null``
    for the personal account. Raises ``ValueError`` for another mode.
    """
    if mode not in ("rl", "sft"):
        raise ValueError(f"mode must be 'rl' or 'sft', got {mode!r}")
    body: dict[str, Any] = {"mode": mode, "teamId": team_id or None}
    if image_tag:
        body["imageTag"] = image_tag
    if source_ref:
        body["sourceRef"] = source_ref
    return body


def build_resume_body(
    *,
    gpu_type: str | None = None,
    image_tag: str | None = None,
    wandb_api_key: str | None = None,
    hf_token: str | None = None,
) -> dict[str, Any]:
    """The POST ``/training/runs/{id}/resume`` body: whichever of ``gpuType``, ``imageTag``,
    ``wandbApiKey``, ``hfToken`` are not ``None``, in that order (reference §3.4)."""
    pairs = (("gpuType", gpu_type), ("imageTag", image_tag), ("wandbApiKey", wandb_api_key), ("hfToken", hf_token))
    return {key: value for key, value in pairs if value is not None}


def build_volume_body(
    name: str, size: str, *, team_id: str | None = None, cluster: str | None = None, warm: bool = True
) -> dict[str, Any]:
    """The POST ``/training/volumes`` body: ``{name, size, warm, teamId?, cluster?}`` (``size`` like ``"5Ti"``)."""
    body: dict[str, Any] = {"name": name, "size": size, "warm": warm}
    if team_id:
        body["teamId"] = team_id
    if cluster:
        body["cluster"] = cluster
    return body
