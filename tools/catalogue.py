"""Catalogue reads: models, GPU types with prices, volumes, teams.

``team`` on every input: ``"personal"``, a team id, or null for the configured owner
(:func:`tools.core.resolve_owner`, non-strict: the CLI's precedence). Sources:
GET ``/training/available-fft-models`` (models, on-demand offers, beta access),
GET ``/training/available-gpu-types``, GET ``/training/volumes``, GET ``/user/teams``
(reference/prime-api.md §2.1 rows 6, 7, 23, 26; §2.4, §2.5, §2.7); a volume's files: its transfer route
(row 28) and storage, read as ``prime volumes ls`` / ``du`` 0.18.0 read them (``volume_objects.py``).

Prices are USD per GPU-hour for on-demand capacity. ``null`` means unknown (reserved
capacity has no on-demand price), never zero. ``on_demand_beta_access`` null means the
platform did not say: it is not a denial.

Results stay under the output budget (:data:`tools.core.OUTPUT_BUDGET_CHARS` characters of
JSON); when items are cut, ``truncated`` is true and ``omitted`` / ``narrow_hint`` say what and how to narrow.
Errors: platform errors (``unauthorized``, ``forbidden``, ``unavailable``...), and
``invalid_team`` for a malformed team id.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tools.core import Context, Owner, fit_largest, open_volume, resolve_owner, tool
from tools.errors import call, fail
from tools.platform import wire

_TEAM = ("Owner: 'personal', a team id (see mf_list_teams), or null for the configured owner "
         "(PRIME_TEAM_ID, then ~/.prime/config.json, else personal).")


def _owner(ctx: Context, team: str | None) -> Owner:
    return resolve_owner(ctx, team, strict=False)


# --------------------------------------------------------------------------------------
# Models and GPUs
# --------------------------------------------------------------------------------------


class OnDemandOffer(BaseModel):
    """A GPU type on shared on-demand capacity (``onDemand[]`` of available-fft-models)."""

    gpu_type: str = Field(description="GPU type, e.g. H200_141GB.")
    usd_per_gpu_hour: float | None = Field(description="Price in USD per GPU-hour; null = unknown.")
    available_now: bool = Field(description="Coarse capacity hint; not a promise that a run starts now.")
    is_beta: bool = Field(description="On-demand capacity of this type is in beta.")
    discount_label: str | None = Field(description="Discount text shown by the platform, if any.")


class ModelCluster(BaseModel):
    """A cluster that has a model cached."""

    cluster_id: str | None = Field(description="Cluster id.")
    cluster_name: str | None = Field(description="Cluster name.")
    gpu_type: str | None = Field(description="GPU type of the cluster.")


class ModelInfo(BaseModel):
    """A trainable base model and where it is cached."""

    name: str = Field(description="Hugging Face id, as [model] name in a prime-rl TOML.")
    gpu_types: list[str] = Field(description="GPU types of the clusters that have it cached.")
    clusters: list[ModelCluster] = Field(description="Clusters that have it cached.")


class ListModelsResult(BaseModel):
    """Result of :func:`list_models`."""

    owner: Owner = Field(description="Owner the catalogue was read for.")
    models: list[ModelInfo] = Field(description="Models (in platform order), possibly cut to the budget.")
    total_models: int = Field(description="Models matching the filter before any cut.")
    on_demand: list[OnDemandOffer] = Field(description="On-demand GPU offers with prices.")
    on_demand_beta_access: bool | None = Field(
        description="true/false as the platform says; null = unknown (not a denial).")
    truncated: bool = Field(description="true when models were left out to fit the output budget.")
    omitted: str | None = Field(description="What was left out, when truncated.")
    narrow_hint: str | None = Field(description="How to ask for less, when truncated.")


class ListModelsInput(BaseModel):
    """Input of :func:`list_models`."""

    model_config = ConfigDict(extra="forbid")

    team: str | None = Field(default=None, description=_TEAM)
    search: str | None = Field(default=None, max_length=200,
                               description="Only models whose name contains this text (case-insensitive).")


def _offers(models: wire.AvailableModels) -> list[OnDemandOffer]:
    return [OnDemandOffer(gpu_type=o.gpu_type, usd_per_gpu_hour=o.price_per_gpu_hour, available_now=o.available_now,
                          is_beta=o.is_beta, discount_label=o.discount_label) for o in models.on_demand]


@tool
def list_models(inp: ListModelsInput, ctx: Context) -> ListModelsResult:
    """Trainable models with their clusters/GPU types, and on-demand offers (USD per GPU-hour).

    Source: GET ``/training/available-fft-models?team_id=`` (a 404 from an older platform
    gives an empty list with ``on_demand_beta_access`` null).
    """
    owner = _owner(ctx, inp.team)
    data = ctx.platform().list_models(team_id=owner.team_id)
    needle = (inp.search or "").lower()
    models = [
        ModelInfo(name=m.name, gpu_types=sorted({c.gpu_type for c in m.clusters if c.gpu_type}),
                  clusters=[ModelCluster(cluster_id=c.cluster_id, cluster_name=c.cluster_name, gpu_type=c.gpu_type)
                            for c in m.clusters])
        for m in data.models if needle in m.name.lower()
    ]
    offers = _offers(data)

    def build(k: int) -> ListModelsResult:
        cut = len(models) - k
        return ListModelsResult(
            owner=owner, models=models[:k], total_models=len(models), on_demand=offers,
            on_demand_beta_access=data.on_demand_beta_access, truncated=cut > 0,
            omitted=f"{cut} of {len(models)} models (the last ones in platform order)." if cut else None,
            narrow_hint="Search for part of the model name (e.g. Qwen3) to list fewer models." if cut else None)

    return fit_largest(build, len(models))


class GpuInfo(BaseModel):
    """A GPU type the owner can train on."""

    gpu_type: str = Field(description="GPU type, e.g. H200_141GB (use as gpu_type in the TOML or plan).")
    usd_per_gpu_hour: float | None = Field(
        description="On-demand price in USD per GPU-hour; null = unknown (e.g. reserved capacity, no on-demand offer).")
    capacity: str = Field(description="on_demand (priced offer) or reserved_or_unpriced (no on-demand price).")
    available_now: bool | None = Field(description="On-demand capacity hint; null when there is no on-demand offer.")
    is_beta: bool | None = Field(description="On-demand beta flag; null when there is no on-demand offer.")
    discount_label: str | None = Field(description="Discount text, if any.")


class ListGpusResult(BaseModel):
    """Result of :func:`list_gpus`."""

    owner: Owner = Field(description="Owner the list was read for.")
    gpus: list[GpuInfo] = Field(description="GPU types (platform order), joined with on-demand prices.")
    on_demand_beta_access: bool | None = Field(description="true/false as the platform says; null = unknown.")
    note: str = Field(description="How to read prices.")


class ListGpusInput(BaseModel):
    """Input of :func:`list_gpus`."""

    model_config = ConfigDict(extra="forbid")

    team: str | None = Field(default=None, description=_TEAM)


@tool
def list_gpus(inp: ListGpusInput, ctx: Context) -> ListGpusResult:
    """GPU types the owner can train on, each with its on-demand price when there is one.

    Sources: GET ``/training/available-gpu-types?team_id=`` joined with ``onDemand[]`` of
    GET ``/training/available-fft-models?team_id=``. A type without an on-demand offer has
    ``usd_per_gpu_hour`` null (unknown; e.g. the team's reserved capacity), never 0.
    """
    owner = _owner(ctx, inp.team)
    client = ctx.platform()
    types = client.list_gpu_types(team_id=owner.team_id).gpu_types
    models = client.list_models(team_id=owner.team_id)
    offers = {o.gpu_type: o for o in models.on_demand}
    gpus = []
    for name in types:
        offer = offers.get(name)
        priced = offer is not None and offer.price_per_gpu_hour is not None
        gpus.append(GpuInfo(
            gpu_type=name, usd_per_gpu_hour=offer.price_per_gpu_hour if offer else None,
            capacity="on_demand" if priced else "reserved_or_unpriced",
            available_now=offer.available_now if offer else None, is_beta=offer.is_beta if offer else None,
            discount_label=offer.discount_label if offer else None))
    note = ("Prices are USD per GPU-hour on shared on-demand capacity; a run costs price x GPU count x hours. "
            "null price = unknown (reserved or not offered on demand): ask the team admin, never assume 0.")
    return ListGpusResult(owner=owner, gpus=gpus, on_demand_beta_access=models.on_demand_beta_access, note=note)


# --------------------------------------------------------------------------------------
# Volumes
# --------------------------------------------------------------------------------------

_VOLUME_STATUS = {"RUNNING": "created", "TERMINATING": "deleting", "TOMBSTONED": "delete failed", "FAILED": "failed"}


class VolumeInfo(BaseModel):
    """A named storage volume (GET /training/volumes)."""

    name: str = Field(description="Volume name (use as volume when planning a run).")
    status: str | None = Field(
        description="Platform status: RUNNING (= created, usable), TERMINATING, TOMBSTONED, FAILED, ...")
    status_label: str | None = Field(description="The prime CLI's label for the status (created, deleting, ...).")
    size: str | None = Field(description="Size as a Kubernetes quantity, e.g. 5Ti (1 Ti = 2^40 bytes).")
    cluster: str | None = Field(description="Cluster name.")
    created_by: str | None = Field(description="Name of the creator, when known.")
    created_at: str | None = Field(description="Creation time as sent by the platform.")


class VolumeEntry(BaseModel):
    """One entry of a folder on a volume (ListObjectsV2 with delimiter ``/``)."""

    name: str = Field(description="Path relative to the volume root; a folder ends in /.")
    kind: Literal["file", "folder"] = Field(description="file or folder.")
    size_bytes: int | None = Field(default=None, description="File size in bytes (null for a folder).")
    modified: datetime | None = Field(default=None, description="When the file was last written (UTC).")


class VolumeFiles(BaseModel):
    """One page of a folder of a volume (like ``prime volumes ls``), and what lies under it (like ``du``)."""

    volume: str = Field(description="Volume name.")
    path: str = Field(description="Folder listed, relative to the volume root ('' = the root).")
    entries: list[VolumeEntry] = Field(description=f"Up to {50} entries of this page, by name.")
    next_cursor: str | None = Field(default=None, description="Pass as cursor for the next page; null: last page.")
    bytes: int | None = Field(default=None, description="Bytes of every file under path (first page only).")
    files: int | None = Field(default=None, description="Files under path (first page only).")
    totals_complete: bool = Field(default=True, description=f"False when the totals stopped at {20_000} files.")


class ListVolumesResult(BaseModel):
    """Result of :func:`list_volumes`."""

    owner: Owner = Field(description="Owner the volumes belong to.")
    listing: VolumeFiles | None = Field(default=None, description="With volume: that volume's files under path.")
    volumes: list[VolumeInfo] = Field(description="Volumes, possibly cut to the budget.")
    total: int = Field(description="Number of volumes the platform returned.")
    truncated: bool = Field(description="true when volumes were left out to fit the output budget.")
    omitted: str | None = Field(description="What was left out, when truncated.")
    narrow_hint: str | None = Field(description="How to ask for less, when truncated.")


class ListVolumesInput(BaseModel):
    """Input of :func:`list_volumes`."""

    model_config = ConfigDict(extra="forbid")

    team: str | None = Field(default=None, description=_TEAM)
    search: str | None = Field(default=None, max_length=200,
                               description="Only volumes whose name contains this text (case-insensitive).")
    volume: str | None = Field(default=None, min_length=1, max_length=200,
                               description="Also list this volume's files under path (reads its storage).")
    path: str = Field(default="", max_length=1000, description="Folder on the volume, e.g. runs/<run_id>/.")
    cursor: str | None = Field(default=None, max_length=2000, description="next_cursor of the previous page.")


#: Entries per page of a volume folder, and files counted at most for its totals.
LS_PAGE = 50
DU_MAX_FILES = 20_000


@tool
def list_volumes(inp: ListVolumesInput, ctx: Context) -> ListVolumesResult:
    """The owner's named volumes (GET ``/training/volumes?teamId=``); with ``volume``, one page of the folder
    ``path`` on it (ListObjectsV2, delimiter ``/``, :data:`LS_PAGE` entries) and, on the first page, the bytes
    and files under it (up to :data:`DU_MAX_FILES`). ``runs/.sessions/`` (the platform's sync metadata) is left
    out, as ``prime volumes ls`` does.

    Errors: the platform codes; with ``volume``: ``volume_not_found``, ``bad_arguments`` (a path climbing out of
    the volume), ``transfer_unavailable``, ``forbidden``, ``conflict``."""
    owner = _owner(ctx, inp.team)
    needle = (inp.search or "").lower()
    every = ctx.platform().list_volumes(team_id=owner.team_id)
    volumes = [
        VolumeInfo(name=v.name, status=v.status, status_label=_VOLUME_STATUS.get((v.status or "").upper()),
                   size=v.size, cluster=v.cluster, created_by=v.created_by_name, created_at=v.created_at)
        for v in every if needle in v.name.lower()
    ]
    listing = None
    if inp.volume is not None:
        if inp.volume not in {v.name for v in every}:
            again = call("mf_list_volumes", team=inp.team)
            raise fail("volume_not_found", f"Volume {inp.volume!r} is not one of {owner.label}'s volumes.",
                       f"Pick a name from {again}.", next_calls=[again])
        listing = _volume_files(ctx, owner, inp.volume, inp.path, inp.cursor)

    def build(k: int) -> ListVolumesResult:
        cut = len(volumes) - k
        return ListVolumesResult(owner=owner, listing=listing, volumes=volumes[:k], total=len(volumes),
                                 truncated=cut > 0, omitted=f"{cut} of {len(volumes)} volumes." if cut else None,
                                 narrow_hint="Search for part of the volume name." if cut else None)

    return fit_largest(build, len(volumes))


def _volume_files(ctx: Context, owner: Owner, volume: str, path: str, cursor: str | None) -> VolumeFiles:
    parts = [p for p in path.strip().split("/") if p not in ("", ".")]
    if ".." in parts:
        raise fail("bad_arguments", "path climbs out of the volume ('..'): give a folder inside it.",
                   "Pass a path such as runs/ or runs/<run_id>/checkpoints/.")
    folder = "/".join(parts) + "/" if parts else ""
    with open_volume(ctx, volume, owner.team_id, path=folder, connections=2) as reader:
        page = reader.list_page(folder, delimiter="/", max_keys=LS_PAGE, token=cursor)
        entries = [VolumeEntry(name=p, kind="folder") for p in page.prefixes if not _internal(p)]
        entries += [VolumeEntry(name=o.key, kind="file", size_bytes=o.size, modified=o.modified)
                    for o in page.objects if o.key != folder and not _internal(o.key)]
        entries.sort(key=lambda e: e.name)
        total = files = 0
        complete = True
        if cursor is None:
            for obj in reader.iter_objects(folder):
                if _internal(obj.key) or obj.key.endswith("/"):
                    continue
                if files >= DU_MAX_FILES:
                    complete = False
                    break
                total, files = total + obj.size, files + 1
    return VolumeFiles(volume=volume, path=folder, entries=entries, next_cursor=page.next_token,
                       bytes=total if cursor is None else None, files=files if cursor is None else None,
                       totals_complete=complete)


def _internal(key: str) -> bool:
    """The platform's session sync metadata (prime 0.18.0 ``volume_objects.is_internal``)."""
    return key.rstrip("/") == "runs/.sessions" or key.startswith("runs/.sessions/")


# --------------------------------------------------------------------------------------
# Teams
# --------------------------------------------------------------------------------------


class TeamEntry(BaseModel):
    """A team of this key (GET /user/teams)."""

    team_id: str = Field(description="Team id (pass as team=...).")
    name: str | None = Field(description="Team name.")
    slug: str | None = Field(description="Team slug.")
    role: str | None = Field(description="Your role (ADMIN, MEMBER, ...).")
    selected: bool = Field(description="true for the team requests act for by default.")


class ListTeamsResult(BaseModel):
    """Result of :func:`list_teams`."""

    teams: list[TeamEntry] = Field(description="Teams of this API key (matching search), possibly cut to the budget.")
    total: int = Field(description="Teams matching the filter before any cut.")
    selected: Owner = Field(description="The owner requests act for by default, and where that choice came from.")
    selected_is_member: bool = Field(description="false when the configured team is not one of these teams.")
    launch_would_stop_ambiguous: bool = Field(
        description="true when no team is configured but the key has teams: mf_plan_run stops until a team is named.")
    note: str = Field(description="What to do with this list.")
    truncated: bool = Field(description="true when teams were left out to fit the output budget.")
    omitted: str | None = Field(description="What was left out, when truncated.")
    narrow_hint: str | None = Field(description="How to ask for less, when truncated.")


class ListTeamsInput(BaseModel):
    """Input of :func:`list_teams`."""

    model_config = ConfigDict(extra="forbid")

    search: str | None = Field(default=None, max_length=200,
                               description="Only teams whose name, slug or id contains this text (case-insensitive).")


@tool
def list_teams(inp: ListTeamsInput, ctx: Context) -> ListTeamsResult:
    """Teams of this API key and the currently selected owner (with its source).

    Sources: GET ``/user/teams`` (all pages) and :func:`tools.core.resolve_owner`
    (``PRIME_TEAM_ID``, then the context / ``~/.prime/config.json`` ``team_id``, else personal).
    """
    teams = ctx.platform().list_all_teams()
    owner = _owner(ctx, None)
    by_id = {t.team_id: t for t in teams}
    if owner.team_id in by_id and not owner.team_name:
        owner = owner.model_copy(update={"team_name": by_id[owner.team_id].name})
    needle = (inp.search or "").lower()
    entries = [TeamEntry(team_id=t.team_id, name=t.name, slug=t.slug, role=t.role, selected=t.team_id == owner.team_id)
               for t in teams if needle in f"{t.name} {t.slug} {t.team_id}".lower()]
    member = owner.team_id is None or owner.team_id in by_id
    ambiguous = owner.source == "default" and bool(teams)
    if ambiguous:
        note = (f"No team is configured, so requests act for the personal account; this key also belongs to "
                f"{len(teams)} team(s). Ask the user who pays, then plan with the team set to personal or a team id "
                "(or set PRIME_TEAM_ID).")
    elif not member:
        note = (f"The configured team {owner.team_id} ({owner.source}) is not one of this key's teams: set "
                "PRIME_TEAM_ID to one listed here, or name the team explicitly.")
    else:
        note = f"Requests act for {owner.label} ({owner.source}). Name a team to act for another owner."

    def build(k: int) -> ListTeamsResult:
        cut = len(entries) - k
        return ListTeamsResult(teams=entries[:k], total=len(entries), selected=owner, selected_is_member=member,
                               launch_would_stop_ambiguous=ambiguous, note=note, truncated=cut > 0,
                               omitted=f"{cut} of {len(entries)} teams." if cut else None,
                               narrow_hint="Search for part of the team name." if cut else None)


    return fit_largest(build, len(entries))

