"""The emulator's in-memory world: accounts, runs, volumes, traces, the clock, and scenarios.

:class:`EmulatorState` is what the routes call and what tests hold as ``emulator.state``.
Every public method takes the state lock, advances the runs it touches to the simulated
now, and raises :class:`~skill.emulator.errors.ApiError` for an answer the platform would
refuse.
"""

from __future__ import annotations

import dataclasses
import math
import random
import re
import string
import threading
from collections.abc import Mapping
from typing import Any

from .clock import SimClock
from .configs import config_problems, is_retired_lora, model_name, run_spec
from .content import hex_id
from .errors import ApiError, not_found
from .scenarios import scenario, scenario_map
from .seed import DEFAULT_SPEED, GpuType, Seed, User, Volume, default_seed
from .simulator import PRIME_RL_IMAGE, RunPlacement, SimRun, Timing, TraceShape
from .storage import BUCKET, CHECKPOINT_FILES, S3_PATH, StoredFile, StoredObject, VolumeStorage
from .traces import Owner, TraceStore

_VOLUME_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
_VOLUME_SIZE = re.compile(r"^\d+(Gi|Ti)$")
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
#: Statuses that hold a place under the concurrent-run limit (PAUSED released its GPUs: platform-docs.md).
ACTIVE_STATUSES = frozenset({"PENDING", "QUEUED", "RUNNING", "PAUSING"})


def _commit_of(source_ref: Any) -> str | None:
    """The 40-hex commit a ``sourceRef`` pins: itself if it is one, else a stable fake sha."""
    if not isinstance(source_ref, str) or not source_ref:
        return None
    return source_ref if _HEX40.match(source_ref) else hex_id("ref", source_ref, length=40)


def _missing(*loc: str) -> ApiError:
    return ApiError(422, [{"loc": ["body", *loc], "msg": "Field required", "type": "missing"}])


class EmulatorState:
    """Accounts, runs, volumes and traces of one emulator, on one simulated clock.

    Args:
        speed: simulated seconds per wall second (0 freezes the clock).
        seed: accounts and catalogue (default :func:`~skill.emulator.seed.default_seed`).
        timing: timeline durations (default :class:`~skill.emulator.simulator.Timing`).
        shape: traces per step (default :class:`~skill.emulator.simulator.TraceShape`).
        prepare_submission_supported: what ``POST /training/runs/prepare`` answers in
            ``submission_supported`` (default False: the real ``prime`` then skips its local
            schema compile, which would fetch prime-rl from GitHub).
        prepare_available: False makes ``/training/runs/prepare`` answer 404 (an older platform).
        rng_seed: seed of the run-id generator (None, the default: random ids, so runs of two
            emulator sessions never share an id in a persistent state store).
        scenario: scenarios for every run created (a name, or ``{name: params}``); kept by
            :meth:`reset`. ValueError on a bad name or parameter.
        checkpoint_files: the files of every checkpoint on a volume (default
            :data:`~skill.emulator.storage.CHECKPOINT_FILES`, about 13 MiB; a benchmark passes large sparse ones).
        max_concurrent_runs: the ``max_concurrent_training_runs`` whoami advertises (default 5) and a create
            over it refuses (409).
    """

    def __init__(self, speed: float = DEFAULT_SPEED, *, seed: Seed | None = None, timing: Timing | None = None,
                 shape: TraceShape | None = None, prepare_submission_supported: bool = False,
                 prepare_available: bool = True, rng_seed: int | None = None,
                 scenario: str | Mapping[str, Mapping[str, Any] | None] | None = None,
                 checkpoint_files: tuple[StoredFile, ...] = CHECKPOINT_FILES, max_concurrent_runs: int = 5) -> None:
        self.lock = threading.RLock()
        self._options: dict[str, Any] = {
            "speed": speed, "seed": seed, "timing": timing, "shape": shape,
            "prepare_submission_supported": prepare_submission_supported,
            "prepare_available": prepare_available, "rng_seed": rng_seed, "scenario": scenario_map(scenario),
            "checkpoint_files": tuple(checkpoint_files), "max_concurrent_runs": max_concurrent_runs,
        }
        self._build(**self._options)

    def _build(self, *, speed: float, seed: Seed | None, timing: Timing | None, shape: TraceShape | None,
               prepare_submission_supported: bool, prepare_available: bool, rng_seed: int | None,
               scenario: dict[str, dict[str, Any]], checkpoint_files: tuple[StoredFile, ...],
               max_concurrent_runs: int) -> None:
        self.clock = SimClock(speed)
        self.max_concurrent_runs = max_concurrent_runs
        self.seed = seed or default_seed()
        self.timing = timing or Timing()
        self.shape = shape or TraceShape()
        self.prepare_submission_supported = prepare_submission_supported
        self.prepare_available = prepare_available
        self.store = TraceStore(self.clock.iso, self.clock.from_iso)
        self.runs: dict[str, SimRun] = {}
        self.volumes: list[Volume] = [Volume(v.name, v.team_id, v.owner_user_id, v.size, gpu_type=v.gpu_type)
                                      for v in self.seed.volumes]
        self.next_scenarios: dict[str, dict[str, Any]] = {}
        self.every_run_scenarios: dict[str, dict[str, Any]] = {name: dict(p) for name, p in scenario.items()}
        self._rng = random.Random(rng_seed)
        self.create_attempts = 0
        self.storage = VolumeStorage(files=checkpoint_files)

    # -- admin -----------------------------------------------------------------------------
    def reset(self) -> None:
        """Back to the seeded state: no runs, the constructor's timing and every-run scenarios only,
        the clock restarted at its speed."""
        with self.lock:
            self._build(**{**self._options, "speed": self.clock.speed})

    def set_speed(self, speed: float) -> None:
        """Change the clock speed (simulated seconds per wall second)."""
        with self.lock:
            self.clock.set_speed(speed)

    def advance(self, seconds: float) -> float:
        """Move the clock ``seconds`` simulated seconds ahead and apply what became due."""
        with self.lock:
            now = self.clock.advance(seconds)
            for run in self.runs.values():
                run.advance(now)
            return now

    def now(self) -> float:
        """The simulated now."""
        return self.clock.now()

    def set_scenario(self, name: str, run_id: str | None = None, *, every_run: bool = False,
                     **params: Any) -> dict[str, Any]:
        """Apply a scenario to a run now, to the next run created (``run_id`` None), or to every
        run created from now on (``every_run``). Returns the parameters with defaults.

        Several scenarios can be stacked. ValueError on bad input, KeyError for an unknown run.
        """
        params = scenario(name, **params)
        with self.lock:
            if every_run:
                if run_id is not None:
                    raise ValueError("every_run applies to runs created later: give no run_id")
                self.every_run_scenarios[name] = params
                return params
            if run_id is None:
                self.next_scenarios[name] = params
                return params
            run = self.runs[run_id]
            run.advance(self.now())
            run.scenarios[name] = params
            return params

    def clear_scenarios(self, run_id: str | None = None) -> None:
        """Forget the scenarios of the next run and of every run (``run_id`` None), or a run's."""
        with self.lock:
            if run_id is None:
                self.next_scenarios.clear()
                self.every_run_scenarios.clear()
            else:
                self.runs[run_id].scenarios.clear()

    def set_timing(self, **seconds: float) -> Timing:
        """Change :class:`Timing` fields (simulated seconds) for runs created from now on.

        ValueError on an unknown field or a negative or non-number value.
        """
        known = {f.name for f in dataclasses.fields(Timing)}
        unknown = sorted(set(seconds) - known)
        if unknown:
            raise ValueError(f"unknown timing field(s) {unknown}; known: {', '.join(sorted(known))}")
        for name, value in seconds.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"{name} must be a number of seconds >= 0")
        with self.lock:
            self.timing = dataclasses.replace(self.timing, **{k: float(v) for k, v in seconds.items()})
            return self.timing

    def run(self, run_id: str) -> SimRun:
        """A run by id (any owner, deleted included), advanced to now. KeyError if unknown."""
        with self.lock:
            run = self.runs[run_id]
            run.advance(self.now())
            return run

    def summary(self) -> dict[str, Any]:
        """What ``GET /_emulator/state`` shows."""
        with self.lock:
            now = self.now()
            runs = []
            for run in self.runs.values():
                run.advance(now)
                runs.append({"id": run.id, "name": run.name, "status": run.status, "user_id": run.placement.user_id,
                             "team_id": run.placement.team_id, "latest_step": run.current_step,
                             "max_steps": run.spec.max_steps, "deleted": run.deleted,
                             "scenarios": sorted(run.scenarios)})
            return {"now": now, "now_iso": self.clock.iso(now), "speed": self.clock.speed,
                    "run_count": len(self.runs), "create_attempts": self.create_attempts, "runs": runs,
                    "next_scenarios": dict(self.next_scenarios),
                    "every_run_scenarios": dict(self.every_run_scenarios),
                    "timing": dataclasses.asdict(self.timing),
                    "prepare": {"available": self.prepare_available,
                                "submission_supported": self.prepare_submission_supported},
                    "trace_count": self.store.count(now), "traces_generated": self.store.records_made}

    # -- accounts --------------------------------------------------------------------------
    def authenticate(self, authorization: str | None) -> User:
        """The user of an ``Authorization: Bearer <key>`` header; 401 otherwise."""
        scheme, _, key = (authorization or "").partition(" ")
        user = self.seed.user_for_key(key.strip()) if scheme.lower() == "bearer" else None
        if user is None:
            raise ApiError(401, "Invalid or missing API key", code="unauthenticated")
        return user

    def require_member(self, user: User, team_id: str | None, *, code: str = "forbidden") -> None:
        """403 unless ``team_id`` is None or a team the user belongs to."""
        if team_id is None:
            return
        team = self.seed.team(team_id)
        if team is None or user.id not in team.members:
            raise ApiError(403, f"You are not a member of team {team_id}", code=code)

    def traces_owner(self, user: User, team_header: str | None) -> Owner:
        """The traces owner for a request's ``X-Prime-Team-ID`` header."""
        team_id = (team_header or "").strip() or None
        self.require_member(user, team_id)
        return Owner(user.id, team_id)

    def whoami(self, user: User, team_id: str | None) -> dict[str, Any]:
        """``GET /user/whoami``."""
        self.require_member(user, team_id)
        scope = {name: {"read": True, "write": True} for name in ("training", "traces", "volumes", "teams")}
        return {"data": {"id": user.id, "email": user.email, "name": user.name, "slug": user.slug, "scope": scope,
                         "account_limits": {"max_concurrent_training_runs": self.max_concurrent_runs},
                         "key_limits": None}}

    def teams(self, user: User, offset: int, limit: int) -> dict[str, Any]:
        """``GET /user/teams``."""
        mine = [t for t in self.seed.teams if user.id in t.members]
        data = [{"teamId": t.id, "name": t.name, "slug": t.slug, "role": t.members[user.id],
                 "createdAt": t.created_at} for t in mine[offset:offset + limit]]
        return {"data": data, "total_count": len(mine)}

    def members(self, user: User, team_id: str) -> dict[str, Any]:
        """``GET /teams/{team_id}/members``."""
        team = self.seed.team(team_id)
        if team is None or user.id not in team.members:
            raise not_found("Team")
        data = []
        for uid, role in team.members.items():
            member = self.seed.user(uid)
            data.append({"userId": uid, "userName": member.name if member else None,
                         "userEmail": member.email if member else None, "role": role,
                         "joinedAt": team.created_at})
        return {"data": data}

    # -- catalogue -------------------------------------------------------------------------
    def available_models(self, user: User, team_id: str | None) -> dict[str, Any]:
        """``GET /training/available-fft-models``: every seeded model, with the clusters of the
        GPU types this owner may use, plus the on-demand price list."""
        self.require_member(user, team_id)
        gpus = self.seed.gpu_types_for(team_id)
        synced = self.clock.iso(0.0)
        models = [{"name": m.name, "clusters": [
            {"clusterId": g.cluster_id, "clusterName": g.cluster_name, "gpuType": g.name, "cacheSyncedAt": synced}
            for g in gpus if g.name in m.gpu_types]} for m in self.seed.models]
        on_demand = [{"gpuType": g.name, "pricePerGpuHour": g.price_per_gpu_hour, "discountLabel": g.discount_label,
                      "availableNow": g.available_now, "isBeta": g.is_beta}
                     for g in self.seed.gpu_types if g.price_per_gpu_hour is not None]
        return {"models": models, "onDemand": on_demand, "onDemandBetaAccess": True}

    def available_gpu_types(self, user: User, team_id: str | None) -> dict[str, Any]:
        """``GET /training/available-gpu-types``."""
        self.require_member(user, team_id)
        return {"gpuTypes": [g.name for g in self.seed.gpu_types_for(team_id)]}

    # -- volumes ---------------------------------------------------------------------------
    def _volume_json(self, v: Volume, now: float) -> dict[str, Any]:
        creator = self.seed.user(v.owner_user_id)
        gpu = self.seed.gpu(v.gpu_type or self.seed.default_gpu_type)
        return {"name": v.name, "size": v.size, "status": "RUNNING" if now >= v.ready_at_sim else "PENDING",
                "clusterId": gpu.cluster_id if gpu else "", "cluster": gpu.cluster_name if gpu else None,
                "pvcName": f"vol-{v.name}", "createdBy": v.owner_user_id,
                "createdByName": creator.name if creator else None,
                "createdByEmail": creator.email if creator else None,
                "createdAt": self.clock.iso(v.created_at_sim)}

    def _volume(self, name: str, team_id: str | None, user: User) -> Volume | None:
        return next((v for v in self.volumes if v.name == name and v.team_id == team_id
                     and (team_id is not None or v.owner_user_id == user.id)), None)

    def list_volumes(self, user: User, team_id: str | None) -> dict[str, Any]:
        """``GET /training/volumes``: the owner's volumes."""
        with self.lock:
            self.require_member(user, team_id)
            now = self.now()
            return {"volumes": [self._volume_json(v, now) for v in self.volumes if v.team_id == team_id
                                and (team_id is not None or v.owner_user_id == user.id)]}

    def create_volume(self, user: User, body: Any) -> dict[str, Any]:
        """``POST /training/volumes``: PENDING, RUNNING after ``Timing.volume_ready_seconds``."""
        if not isinstance(body, dict):
            raise _missing("name")
        with self.lock:
            team_id = body.get("teamId") or None
            self.require_member(user, team_id)
            name, size = body.get("name"), body.get("size") or "5Ti"
            if not isinstance(name, str) or not _VOLUME_NAME.match(name):
                raise ApiError(400, "Volume name must be lowercase letters, digits and dashes")
            if not isinstance(size, str) or not _VOLUME_SIZE.match(size):
                raise ApiError(400, f"Invalid volume size {size!r}: use a size like \"500Gi\" or \"2Ti\"")
            if self._volume(name, team_id, user):
                raise ApiError(409, f"Volume '{name}' already exists")
            now = self.now()
            volume = Volume(name, team_id, user.id, size, now, now + self.timing.volume_ready_seconds)
            self.volumes.append(volume)
            return self._volume_json(volume, now)

    # -- volume storage (storage.py, routes_storage.py) ----------------------------------------
    def volume_prefix(self, name: str, team_id: str | None = None, user_id: str | None = None) -> str:
        """The storage prefix of a volume (a team's, or ``user_id``'s personal one). KeyError if unknown."""
        with self.lock:
            volume = next((v for v in self.volumes if v.name == name and v.team_id == team_id
                           and (team_id is not None or v.owner_user_id == (user_id or v.owner_user_id))), None)
            if volume is None:
                raise KeyError(name)
            return VolumeStorage.prefix(volume.team_id or volume.owner_user_id, volume.name)

    def transfer_route(self, user: User, name: str, body: Any, endpoint: str) -> dict[str, Any]:
        """``POST /training/volumes/{name}/transfer`` (prime 0.18.0 ``route_volume_transfer``): a ``get`` gets
        ``via: "r2"`` with read credentials for the volume's prefix on the S3 endpoint ``endpoint``, or
        ``via: "session"`` while the caller has a read-write session open on it. 403 for a team the caller is
        not in, 404 for a volume the owner does not have, 409 while it is still being created, 400 for a put
        (not emulated) or a path climbing out of the volume, 422 for a missing or unknown mode."""
        if not isinstance(body, dict) or "mode" not in body:
            raise _missing("mode")
        team_id = body.get("teamId") or None
        with self.lock:
            self.require_member(user, team_id)
            volume = self._volume(name, team_id, user)
            if volume is None:
                raise ApiError(404, f"Volume '{name}' not found")
            now = self.now()
            if now < volume.ready_at_sim:
                raise ApiError(409, f"Volume '{name}' is still being created")
            if body["mode"] == "put":
                raise ApiError(400, "Uploads (mode put) are not emulated; only get")
            if body["mode"] != "get":
                raise ApiError(422, [{"loc": ["body", "mode"], "msg": "Input should be 'get' or 'put'",
                                      "type": "literal_error"}])
            path = body.get("path") or ""
            if not isinstance(path, str) or ".." in path.split("/"):
                raise ApiError(400, "path must be a path inside the volume")
            prefix = VolumeStorage.prefix(volume.team_id or volume.owner_user_id, volume.name)
            if prefix in self.storage.sessions:
                return {"via": "session", "session": {
                    "id": "cvs" + hex_id(prefix, length=22), "volumeName": name, "status": "RUNNING",
                    "readOnly": False, "sshConnection": f"root@vol-{name}.emulator.invalid -p 22",
                    "createdAt": self.clock.iso(now), "phase": "ready"}}
            cred = self.storage.issue(prefix, now, self.timing.credential_seconds)
            return {"via": "r2", "endpoint": endpoint.rstrip("/") + S3_PATH, "bucket": BUCKET, "prefix": prefix,
                    "accessKeyId": cred.access_key_id, "secretAccessKey": cred.secret_access_key,
                    "sessionToken": cred.session_token, "expiresAt": self.clock.iso(cred.expires_at)}

    def stored_objects(self, prefix: str) -> list[StoredObject]:
        """Every object under a volume's ``prefix``, sorted by key: the checkpoints of the volume's runs that
        ended (or paused) at least ``Timing.volume_sync_seconds`` ago, and the objects tests put there."""
        with self.lock:
            now = self.now()
            found: list[StoredObject] = []
            for run in self.runs.values():
                owner = run.placement.team_id or run.placement.user_id
                if not run.placement.volume_name or VolumeStorage.prefix(owner, run.placement.volume_name) != prefix:
                    continue
                run.advance(now)
                ended = run.ended_at
                if ended is None or now < ended + run.timing.volume_sync_seconds:
                    continue
                for c in run.checkpoints:
                    found += self.storage.checkpoint_objects(prefix, run.id, c.step, c.created_at,
                                                             self.clock.epoch + c.created_at)
            found += self.storage.added(prefix)
            return sorted(found, key=lambda o: o.key)

    def put_object(self, volume: str, key: str, data: bytes, team_id: str | None = None) -> str:
        """Add an object to a volume (``key`` relative to the volume root, e.g. ``runs/<id>/checkpoints/
        step_5/x``); returns its full key. KeyError for an unknown volume."""
        full = self.volume_prefix(volume, team_id) + key
        self.storage.put(full, data, self.now(), self.clock.epoch)
        return full

    # -- runs ------------------------------------------------------------------------------
    def _visible(self, user: User, run: SimRun) -> bool:
        team_id = run.placement.team_id
        if run.deleted:
            return False
        if team_id is None:
            return run.placement.user_id == user.id
        team = self.seed.team(team_id)
        return team is not None and user.id in team.members

    def get_run(self, user: User, run_id: str) -> SimRun:
        """A run this user may read, advanced to now; 404 ``Run not found`` otherwise."""
        with self.lock:
            run = self.runs.get(run_id)
            if run is None or not self._visible(user, run):
                raise not_found("Run")
            run.advance(self.now())
            return run

    def list_runs(self, user: User, team_id: str | None, page: int, limit: int, mine: bool) -> dict[str, Any]:
        """``GET /rft/runs``: a team's runs (``team_id``) or the user's personal runs, newest first."""
        if page < 1 or not 1 <= limit <= 100:  # FastAPI's own messages for Query(ge=1) and Query(ge=1, le=100)
            field, too_big = ("page", False) if page < 1 else ("limit", limit > 100)
            raise ApiError(422, [{"loc": ["query", field], "input": str(page if field == "page" else limit),
                                  "msg": "Input should be less than or equal to 100" if too_big else
                                  "Input should be greater than or equal to 1",
                                  "type": "less_than_equal" if too_big else "greater_than_equal",
                                  "ctx": {"le": 100} if too_big else {"ge": 1}}])
        with self.lock:
            self.require_member(user, team_id)
            now = self.now()
            runs = [r for r in self.runs.values() if not r.deleted and r.placement.team_id == team_id
                    and (team_id is not None or r.placement.user_id == user.id)
                    and (not mine or r.placement.user_id == user.id)]
            runs.sort(key=lambda r: (r.created_at, r.id), reverse=True)
            total = len(runs)
            chosen = runs[(page - 1) * limit: page * limit]
            for run in chosen:
                run.advance(now)
            return {"runs": [r.to_wire(now, detail=False) for r in chosen], "total": total, "page": page,
                    "limit": limit, "total_pages": math.ceil(total / limit) if total else 0}

    def _new_id(self) -> str:
        alphabet = string.ascii_lowercase + string.digits
        return "c" + "".join(self._rng.choice(alphabet) for _ in range(24))

    def _placement_gpu(self, team_id: str | None, wanted: Any) -> GpuType:
        allowed = self.seed.gpu_types_for(team_id)
        if wanted is not None:
            gpu = self.seed.gpu(wanted) if isinstance(wanted, str) else None
            if gpu is None or gpu not in allowed:
                names = ", ".join(g.name for g in allowed)
                raise ApiError(400, f"GPU type '{wanted}' is not available for this account. Available: {names}")
            return gpu
        team = self.seed.team(team_id) if team_id else None
        if team and team.reserved_gpu_types:
            return self.seed.gpu(team.reserved_gpu_types[0]) or allowed[0]
        return self.seed.gpu(self.seed.default_gpu_type) or allowed[0]

    def create_run(self, user: User, body: Any, *, resume_of: SimRun | None = None) -> dict[str, Any]:
        """``POST /training/runs`` (and the new run of a resume). Returns the create response."""
        with self.lock:
            self.create_attempts += 1
            if not isinstance(body, dict):
                raise ApiError(422, [{"loc": ["body"], "msg": "Input should be a valid dictionary",
                                      "type": "dict_type"}])
            config: dict[str, Any]
            team_id: str | None
            name: str | None
            mode: Any  # the body's "mode", checked below
            if resume_of is not None:
                config, team_id, name = resume_of.config, resume_of.placement.team_id, resume_of.name
                mode = resume_of.spec.loss
            else:
                sent = body.get("config")
                if sent is None:
                    raise _missing("config")
                if not isinstance(sent, dict):
                    raise ApiError(422, [{"loc": ["body", "config"], "msg": "Input should be a valid dictionary",
                                          "type": "dict_type"}])
                config = sent
                team_id, name, mode = body.get("teamId") or None, body.get("name"), body.get("mode")
            self.require_member(user, team_id)
            if is_retired_lora(config):
                raise ApiError(400, "LoRA-style configs (top-level `model = \"...\"` or `[[env]]`) are retired; "
                                    "submit a prime-rl config with [model] name = \"...\"")
            if mode not in (None, "rl", "sft"):
                raise ApiError(422, [{"loc": ["body", "mode"], "msg": "Input should be 'rl' or 'sft'",
                                      "type": "literal_error"}])
            sft = mode == "sft"
            problems = config_problems(config, sft=sft)
            if problems:
                raise ApiError(422, problems)
            base = model_name(config)
            model = self.seed.model(base) if base else None
            if model is None:
                raise ApiError(400, f"Model '{base}' is not available for Hosted Training; "
                                    "see `prime train models` for the supported models")
            gpu = self._placement_gpu(team_id, body.get("gpuType"))
            if gpu.name not in model.gpu_types:
                raise ApiError(400, f"Model '{base}' is not available on {gpu.name} "
                                    f"(available on: {', '.join(model.gpu_types)})")
            source_from = body.get("resumeFrom")
            if resume_of is None and source_from is not None:
                source = self.runs.get(source_from)
                if source is None or not self._visible(user, source):
                    raise not_found("Run to resume from")
                source.advance(self.now())
                if source.status != "PAUSED":
                    raise ApiError(409, "Run is not PAUSED")
                resume_of = source
            if resume_of is not None and resume_of.resumed_as is not None:
                raise ApiError(409, f"Run was already resumed as run {resume_of.resumed_as}")
            self._admit(user, team_id)
            volume_name = body.get("volume") or (resume_of.placement.volume_name if resume_of else None)
            if volume_name is not None and self._volume(volume_name, team_id, user) is None:
                raise ApiError(400, f"Volume '{volume_name}' not found for this account; "
                                    "create it first (prime volumes create)")
            commit = _commit_of(body.get("sourceRef"))
            image_tag = body.get("imageTag")
            if resume_of is not None:  # the same image and prime-rl source as the paused run (platform-docs.md)
                commit = commit or resume_of.placement.source_commit
                image_tag = image_tag or resume_of.placement.image_tag
            now = self.now()
            run = SimRun(
                id=self._new_id(), name=name if isinstance(name, str) else None, config=config,
                spec=run_spec(config, sft=sft),
                placement=RunPlacement(
                    user_id=user.id, team_id=team_id, gpu_type=gpu.name,
                    on_demand=gpu.price_per_gpu_hour is not None, price_per_gpu_hour=gpu.price_per_gpu_hour,
                    cluster_id=gpu.cluster_id, volume_name=volume_name, image_tag=image_tag,
                    source_commit=commit, busy=not gpu.available_now),
                created_at=now, timing=self.timing, shape=self.shape, store=self.store, iso=self.clock.iso,
                epoch=self.clock.epoch, wandb_api_key=body.get("wandbApiKey"),
                scenarios={**self.every_run_scenarios, **self.next_scenarios},
                step_offset=resume_of.current_step if resume_of else 0,
                resumed_from=resume_of.id if resume_of else None,
                checkpoint_bytes=sum(f.size for f in self.storage.files))
            self.next_scenarios.clear()
            self.runs[run.id] = run
            if resume_of is not None:
                resume_of.notice = f"Resumed as run {run.id}"
                resume_of.resumed_as = run.id
            response: dict[str, Any] = {"runId": run.id, "tokenValue": "pit_run_fake_" + hex_id(run.id, length=16)}
            if gpu.price_per_gpu_hour is not None:
                response.update({"onDemand": True, "gpuType": gpu.name, "pricePerGpuHour": gpu.price_per_gpu_hour,
                                 "estimatedCostPerHour": round(gpu.price_per_gpu_hour * run.spec.gpu_count, 4),
                                 "isBeta": gpu.is_beta})
            return response

    def _admit(self, user: User, team_id: str | None) -> None:
        """409 when the account already has ``max_concurrent_training_runs`` (whoami) active runs:
        QUEUED, PENDING, RUNNING or PAUSING, of the team (``team_id``) or of the user's personal
        account. The reference does not say how the platform enforces the limit it advertises; a
        refusal the caller sees is the conservative choice (README)."""
        now = self.now()
        active = [r for r in self.runs.values() if not r.deleted and r.placement.team_id == team_id
                  and (team_id is not None or r.placement.user_id == user.id)]
        for run in active:
            run.advance(now)
        busy = sum(1 for r in active if r.status in ACTIVE_STATUSES)
        if busy >= self.max_concurrent_runs:
            raise ApiError(409, f"Concurrent training run limit reached: {busy} of {self.max_concurrent_runs} "
                                "runs are active for this account (max_concurrent_training_runs). Stop, pause or "
                                "wait for one, then create the run again.")

    def resume_run(self, user: User, run_id: str, body: Any) -> dict[str, Any]:
        """``POST /training/runs/{id}/resume``: a new run continuing a PAUSED one."""
        with self.lock:
            source = self.get_run(user, run_id)
            if source.status != "PAUSED":
                raise ApiError(409, "Run is not PAUSED")
            if source.resumed_as is not None:
                raise ApiError(409, f"Run was already resumed as run {source.resumed_as}")
            body = body if isinstance(body, dict) else {}
            return self.create_run(user, {**body, "gpuType": body.get("gpuType") or source.placement.gpu_type},
                                   resume_of=source)

    def stop_run(self, user: User, run_id: str) -> SimRun:
        """``PUT /rft/runs/{id}/stop``: STOPPED now (terminal runs are left as they are)."""
        with self.lock:
            run = self.get_run(user, run_id)
            run.stop(self.now())
            return run

    def pause_run(self, user: User, run_id: str) -> dict[str, Any]:
        """``POST /training/runs/{id}/pause``: PAUSING, PAUSED after ``Timing.pause_seconds``."""
        with self.lock:
            run = self.get_run(user, run_id)
            run.pause(self.now())
            return {"runId": run.id, "status": run.status}

    def restart_run(self, user: User, run_id: str) -> SimRun:
        """``PUT /rft/runs/{id}/restart`` (RUNNING runs only)."""
        with self.lock:
            run = self.get_run(user, run_id)
            run.restart(self.now())
            return run

    def delete_run(self, user: User, run_id: str) -> None:
        """``DELETE /rft/runs/{id}`` or ``/training/runs/{id}``: stop, then hide the run."""
        with self.lock:
            run = self.get_run(user, run_id)
            run.stop(self.now())
            run.deleted = True

    def prepare(self, user: User, body: Any) -> dict[str, Any]:
        """``POST /training/runs/prepare`` (prime-api.md §4, §8.2 example 4)."""
        if not self.prepare_available:
            raise ApiError(404, "Not Found")
        if not isinstance(body, dict) or body.get("mode") not in ("rl", "sft"):
            raise ApiError(422, [{"loc": ["body", "mode"], "msg": "Input should be 'rl' or 'sft'",
                                  "type": "literal_error"}])
        self.require_member(user, body.get("teamId") or None)
        image_commit = hex_id("prime-rl-image", body.get("imageTag") or "main", length=40)
        source_commit = _commit_of(body.get("sourceRef"))
        schema_commit = source_commit or image_commit
        return {
            "contract_version": 1,
            "mode": body["mode"],
            "runtime": {"repository": PRIME_RL_IMAGE, "digest": "sha256:" + hex_id("digest", image_commit),
                        "image_commit": image_commit, "source_commit": source_commit,
                        "schema_commit": schema_commit},
            "schema_install": {
                "python": "3.12",
                "requirements": [(f"prime-rl-configs @ https://github.com/PrimeIntellect-ai/prime-rl/archive/"
                                  f"{schema_commit}.tar.gz#subdirectory=packages/prime-rl-configs")],
                "constraints": ["pydantic==2.11.7"],
            },
            "submission_supported": self.prepare_submission_supported,
        }

    # -- traces ----------------------------------------------------------------------------
    def advance_all(self) -> float:
        """Advance every run to now (before a traces query); returns now."""
        with self.lock:
            now = self.now()
            for run in self.runs.values():
                run.advance(now)
            return now
