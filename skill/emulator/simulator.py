"""One simulated run: its timeline, and everything observable about it at a simulated time.

A run is advanced lazily: :meth:`SimRun.advance` applies every event (start, step, failure,
completion, ...) whose time has come, in time order, appending metrics, log lines,
checkpoints and traces as it goes. No background thread is involved; callers advance a run
before reading it or changing it.

Default timeline (simulated seconds, see :class:`Timing`): PENDING 0 s (none unless set),
QUEUED 60 s (``runsAhead``, ``queueReason``), RUNNING start-up 90 s (pods Pending 45 s, then
ContainerCreating while the image is pulled; no steps), then one step every 30 s, then a 10 s
finalize (final checkpoint) before COMPLETED. A stop is immediate unless ``stop_seconds``
(or the ``slow_stop`` scenario) gives it a teardown. The README's Time and Scenarios
sections describe what each phase shows.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .billing import run_usage
from .bulk import BulkTraces
from .configs import RunSpec
from .content import hex_id, histogram, metrics_record, reward_mean, rng, rollout_text
from .errors import ApiError
from .logs import LineSource, LogLine, StoredLines, make_line, query_logs
from .logvolume import LogVolume
from .scenarios import CLEARED_BY_RESTART
from .traces import TraceStore
from .uploads import step_upload

TERMINAL = frozenset({"COMPLETED", "FAILED", "STOPPED", "PAUSED"})
MAX_PERIODIC_EVENTS = 500
PRIME_RL_IMAGE = "ghcr.io/primeintellect-ai/prime-rl"
#: Kubernetes' image pull back-off: 10 s, doubling, at most 300 s.
PULL_BACKOFF_SECONDS = (10.0, 300.0)
#: Phases in which a run holds GPUs that are billed: training, saving the final or pause checkpoint,
#: tearing down. Not billed (docs/hosted-training/billing): queued, pending, and start-up (pods
#: scheduled, image pulled) before the first step, also after a restart.
BILLED_PHASES = frozenset({"stepping", "finalizing", "pausing", "stopping"})
#: Prefix of the lines the platform adds about pods (events), as the CLI strips it.
ADMINLOG = "[adminlog] "
#: How many times longer a run queues on a GPU type listed as not available now (platform silent; README).
BUSY_QUEUE_FACTOR = 4


@dataclass
class Timing:
    """Durations of the simulated timeline, in simulated seconds."""

    queue_seconds: float = 60.0
    startup_seconds: float = 90.0
    step_seconds: float = 30.0
    finalize_seconds: float = 10.0
    pause_seconds: float = 20.0
    checkpoint_upload_seconds: float = 15.0
    trace_ingest_seconds: float = 2.0
    volume_ready_seconds: float = 20.0
    #: After a run ends (or pauses), until its files are on the volume's storage (the volume syncs).
    volume_sync_seconds: float = 30.0
    #: Lifetime of the credentials a volume transfer route hands out.
    credential_seconds: float = 900.0
    #: PENDING before QUEUED (0: a run is QUEUED at once).
    pending_seconds: float = 0.0
    #: Of the start-up, how long pods are Pending (unscheduled) before ContainerCreating.
    pod_schedule_seconds: float = 45.0
    #: Teardown after a stop before STOPPED (0: STOPPED at once).
    stop_seconds: float = 0.0


@dataclass
class TraceShape:
    """How many traces a step uploads, and how often eval traces appear."""

    episodes_per_step: int = 4
    traces_per_episode: int = 4
    #: Eval every this many steps when the config has no ``eval.interval`` (0: never).
    eval_interval: int = 5
    eval_episodes: int = 4
    max_traces_per_run: int = 20000


@dataclass
class Checkpoint:
    """A checkpoint: READY once its upload time has passed."""

    id: str
    step: int
    created_at: float
    upload_seconds: float
    size_bytes: int

    def status(self, now: float) -> str:
        """``UPLOADING`` until the upload finishes, then ``READY``."""
        return "READY" if now >= self.created_at + self.upload_seconds else "UPLOADING"


@dataclass
class RunPlacement:
    """Where and how a run was placed: owner, GPU type and price, volume, image pins."""

    user_id: str
    team_id: str | None
    gpu_type: str
    on_demand: bool
    price_per_gpu_hour: float | None
    cluster_id: str
    volume_name: str | None = None
    image_tag: str | None = None
    source_commit: str | None = None
    #: The GPU type had no capacity free when the run was created (``availableNow`` false): it queues longer.
    busy: bool = False


@dataclass
class SimRun:
    """A simulated Hosted Training run (``kind`` DEDICATED_FULL_FT)."""

    id: str
    name: str | None
    config: dict[str, Any]
    spec: RunSpec
    placement: RunPlacement
    created_at: float
    timing: Timing
    shape: TraceShape
    store: TraceStore
    iso: Callable[[float], str]
    wandb_api_key: str | None = None
    scenarios: dict[str, dict[str, Any]] = field(default_factory=dict)
    step_offset: int = 0
    resumed_from: str | None = None
    #: The run that resumed this paused one (a paused run is resumed once).
    resumed_as: str | None = None

    status: str = "QUEUED"
    phase: str = "queued"
    phase_since: float = 0.0
    started_at: float | None = None
    completed_at: float | None = None
    updated_at: float = 0.0
    current_step: int = 0
    last_step_t: float = 0.0
    attempt: int = 0
    metrics: list[dict[str, Any]] = field(default_factory=list)
    step_times: dict[int, float] = field(default_factory=dict)
    logs: list[LogLine] = field(default_factory=list)
    checkpoints: list[Checkpoint] = field(default_factory=list)
    env_status: dict[str, str] = field(default_factory=dict)
    error_message: str | None = None
    failure_analysis: dict[str, Any] | None = None
    notice: str | None = None
    deleted: bool = False
    crashed: bool = False
    periodic_count: int = 0
    last_periodic: float = 0.0
    trace_count: int = 0
    pods_scheduled_at: float | None = None
    pull_events: int = 0
    next_pull_event: float = 0.0
    steps_began_at: float | None = None
    #: Billed seconds of the phases already left (see :data:`BILLED_PHASES`).
    billed_before: float = 0.0
    epoch: float = 0.0
    bulk: BulkTraces | None = None
    #: Bytes of one checkpoint on the volume (the sum of the emulator's checkpoint files).
    checkpoint_bytes: int = 0
    _volume: tuple[tuple[Any, ...], LogVolume] | None = None

    def __post_init__(self) -> None:
        self.phase_since = self.updated_at = self.created_at
        self.current_step = self.step_offset
        if self.pending_seconds > 0:
            self.phase, self.status = "pending", "PENDING"

    # -- derived facts -----------------------------------------------------------------
    @property
    def pending_seconds(self) -> float:
        """PENDING time: the ``pending`` scenario's, else the timing's."""
        return self.scenarios.get("pending", {}).get("seconds", self.timing.pending_seconds)

    @property
    def stop_seconds(self) -> float:
        """Teardown time of a stop: the ``slow_stop`` scenario's, else the timing's."""
        return self.scenarios.get("slow_stop", {}).get("seconds", self.timing.stop_seconds)

    @property
    def step_seconds(self) -> float:
        """Seconds per step; ``long_run`` stretches the steps over its hours."""
        long_run = self.scenarios.get("long_run")
        if long_run:
            return max(self.timing.step_seconds, long_run["hours"] * 3600.0 / (self.spec.max_steps or 20))
        return self.timing.step_seconds

    @property
    def image(self) -> str:
        """The image the run's pods pull (an image-pull scenario's ``image``, else prime-rl's)."""
        for name in ("image_pull_backoff", "image_pull_slow"):
            image = self.scenarios.get(name, {}).get("image")
            if image:
                return image
        return f"{PRIME_RL_IMAGE}:{self.placement.image_tag or 'latest'}"

    @property
    def components(self) -> list[str]:
        """The run's components other than env servers."""
        if self.sft:
            return ["trainer", "orchestrator", "inference"] if self.spec.eval_env_names else ["trainer"]
        return ["orchestrator", "trainer", "inference"]

    def pod_name(self, component: str, env: str | None = None) -> str:
        """A pod's name: ``<run>-env-<env>-0`` for env servers, ``<run>-<component>-0`` otherwise."""
        return (f"{self.id}-env-{env}-0" if env is not None else f"{self.id}-{component}-0").lower()

    @property
    def sft(self) -> bool:
        """Whether this is an SFT run (``loss == "sft"``)."""
        return self.spec.loss == "sft"

    @property
    def primary(self) -> str:
        """The component whose logs ``/logs`` serves without ``component``."""
        return "trainer" if self.sft else "orchestrator"

    @property
    def env_names(self) -> list[str]:
        """Env-server names: training environments, then eval-only ones."""
        names = list(self.spec.env_names)
        names += [e for e in self.spec.eval_env_names if e not in names]
        return names

    @property
    def eval_interval(self) -> int:
        """Steps between eval trace uploads (0 = none)."""
        if self.spec.eval_interval:
            return self.spec.eval_interval
        return 0 if self.sft and not self.spec.eval_env_names else self.shape.eval_interval

    @property
    def samples_steps(self) -> list[int]:
        """Steps with rollout samples: every 5th, and the last of a finished run."""
        steps = [k for k in self.step_times if k % 5 == 0]
        if self.spec.max_steps and self.spec.max_steps in self.step_times and self.spec.max_steps not in steps:
            steps.append(self.spec.max_steps)
        return sorted(steps) if not self.sft else []

    @property
    def distribution_steps(self) -> list[int]:
        """Steps with distributions: the sample steps and the latest step."""
        steps = list(self.samples_steps)
        if self.step_times and not self.sft:
            latest = max(self.step_times)
            if latest not in steps:
                steps.append(latest)
        return steps

    def _line(self, t: float, component: str, level: str, message: str, **kw: Any) -> None:
        self.logs.append(make_line(t, self.iso(t), component, level, message, **kw))

    def _pod_event(self, t: float, level: str, message: str) -> None:
        """A platform line about every pod (``{pod}`` in ``message`` is its name), in each
        component's logs with the ``[adminlog] `` prefix."""
        for component in self.components:
            self._line(t, component, level, message.replace("{pod}", self.pod_name(component)), prefix=ADMINLOG)
        for env in self.env_names:
            self._line(t, "env-server", level, message.replace("{pod}", self.pod_name("env-server", env)),
                       env_name=env, prefix=ADMINLOG)

    # -- the timeline ------------------------------------------------------------------
    def advance(self, now: float) -> None:
        """Apply every event due at or before simulated time ``now``."""
        while True:
            event = self._next_event()
            if event is None or event[0] > now:
                return
            when, action = event
            action(when)
            self.updated_at = max(self.updated_at, when)

    def _next_event(self) -> tuple[float, Callable[[float], None]] | None:
        tm = self.timing
        if self.phase == "pending":
            return self.phase_since + self.pending_seconds, self._queue
        if self.phase == "queued":
            if "stay_queued" in self.scenarios:
                return None
            return self.phase_since + self.queue_seconds, self._start
        if self.phase == "starting":
            if self.pods_scheduled_at is None:
                return self.phase_since + min(tm.pod_schedule_seconds, tm.startup_seconds), self._schedule_pods
            backoff = self.scenarios.get("image_pull_backoff")
            if backoff:
                give_up = backoff["fail_after_seconds"]
                if give_up and self.next_pull_event >= self.pods_scheduled_at + give_up:
                    return self.pods_scheduled_at + give_up, self._pull_given_up
                if self.pull_events >= MAX_PERIODIC_EVENTS:
                    return None
                return self.next_pull_event, self._pull_event
            slow = self.scenarios.get("image_pull_slow", {}).get("seconds", 0.0)
            return self.phase_since + tm.startup_seconds + slow, self._begin_steps
        if self.phase == "stopping":
            return self.phase_since + self.stop_seconds, self._stopped
        if self.phase == "stepping":
            step_seconds = self.step_seconds
            fail = self.scenarios.get("fail")
            if fail and self.current_step + 1 >= fail["at_step"]:
                return self.last_step_t + 0.6 * step_seconds, self._fail
            crash = self.scenarios.get("crash_loop")
            if crash and self.current_step >= crash["at_step"]:
                if not self.crashed:
                    return self.last_step_t + 0.5 * step_seconds, self._crash
                if self.periodic_count >= MAX_PERIODIC_EVENTS:
                    return None
                return self.last_periodic + 30.0, self._crash_tick
            stall = self.scenarios.get("stall")
            if stall and self.current_step >= stall["at_step"]:
                return None
            return self.last_step_t + step_seconds, self._step
        if self.phase == "finalizing":
            return self.phase_since + tm.finalize_seconds, self._complete
        if self.phase == "pausing":
            return self.phase_since + tm.pause_seconds, self._paused
        return None

    def _enter(self, phase: str, t: float, status: str | None = None) -> None:
        if self.phase in BILLED_PHASES:
            self.billed_before += max(0.0, t - self.phase_since)
        self.phase, self.phase_since = phase, t
        if status:
            self.status = status
        self.updated_at = t

    def _queue(self, t: float) -> None:
        self._enter("queued", t, "QUEUED")

    @property
    def pull_scenario(self) -> bool:
        """Whether an image-pull scenario applies (only then are pod events logged)."""
        return "image_pull_slow" in self.scenarios or "image_pull_backoff" in self.scenarios

    def _schedule_pods(self, t: float) -> None:
        self.pods_scheduled_at = t
        for env in self.env_names:
            self.env_status[env] = "ContainerCreating"
        if self.pull_scenario:
            self._pod_event(t, "INFO", "Successfully assigned {pod} to gpu-node-" + hex_id(self.id, "node", length=6))
            self._pod_event(t + 0.01, "INFO", f'Pulling image "{self.image}"')
        self.next_pull_event = t + 5.0

    def _pull_event(self, t: float) -> None:
        """Odd events: a pull attempt fails (ErrImagePull); even ones: the back-off after it
        (ImagePullBackOff, 10 s doubling to 300 s until the next attempt)."""
        self.pull_events += 1
        n, image = self.pull_events, self.image
        failed = n % 2 == 1
        for env in self.env_names:
            self.env_status[env] = "ErrImagePull" if failed else "ImagePullBackOff"
        if failed:
            self._pod_event(t, "ERROR", f'Failed to pull image "{image}": rpc error: code = NotFound desc = '
                                        f'failed to pull and unpack image "{image}": not found')
            self._pod_event(t + 0.01, "ERROR", "Error: ErrImagePull")
            if not self.sft:
                self._line(t + 0.02, "orchestrator", "WARNING", "Waiting for the env servers: image not pulled yet")
            self.next_pull_event = t + 1.0
            return
        self._pod_event(t, "WARNING", f'Back-off pulling image "{image}"')
        self._pod_event(t + 0.01, "ERROR", "Error: ImagePullBackOff")
        low, high = PULL_BACKOFF_SECONDS
        self.next_pull_event = t + min(high, low * 2 ** (n // 2 - 1))

    def _pull_given_up(self, t: float) -> None:
        image = self.image
        waited = round(t - (self.pods_scheduled_at or t))
        attempts = (self.pull_events + 1) // 2
        self._enter("done", t, "FAILED")
        self.completed_at = t
        self.error_message = f"Image pull failed: {image} (ImagePullBackOff)"
        self.failure_analysis = {
            "rootCause": f"The image {image} could not be pulled (ErrImagePull: not found); the pods never started",
            "evidence": [f'Failed to pull image "{image}": not found', "Error: ImagePullBackOff",
                         f"{attempts} pull attempts over {waited} s"],
            "confidence": 0.95,
        }
        self._pod_event(t, "ERROR", f'Giving up pulling image "{image}" after {waited} s')
        for env in self.env_names:
            self.env_status[env] = "Terminated"

    def _start(self, t: float) -> None:
        self._enter("starting", t, "RUNNING")
        self.started_at = t
        base, gpus = self.spec.base_model, self.spec.gpu_count
        for env in self.env_names:
            self.env_status[env] = "Pending"
        tick = iter(i * 0.01 for i in range(1000))
        if not self.sft:
            self._line(t + next(tick), "orchestrator", "INFO", f"Starting orchestrator for run {self.id} (prime-rl)")
            self._line(t + next(tick), "orchestrator", "INFO",
                       f"Loading environments: {', '.join(self.spec.env_names) or '-'}")
            self._line(t + next(tick), "orchestrator", "INFO", "Waiting for inference server at http://inference:8000")
        self._line(t + next(tick), "trainer", "INFO", f"Loading model {base} ({gpus} GPUs in this run)",
                   prefix="[rank0]: ")
        if "echo_wandb_key" in self.scenarios:
            key = self.wandb_api_key or "<none forwarded>"
            self._line(t + next(tick), "trainer", "INFO", f"wandb: logging in with api key {key}", prefix="[rank0]: ")
        if self.spec.wandb_project:
            self._line(t + next(tick), "trainer", "INFO", f"wandb: syncing to project {self.spec.wandb_project}",
                       prefix="[rank0]: ")
        if not self.sft or self.spec.eval_env_names:
            self._line(t + next(tick), "inference", "INFO", f"Starting vLLM engine for {base}")
            self._line(t + next(tick), "inference", "WARNING",
                       "max_num_seqs not set; defaulting to 256 concurrent sequences")
        for env in self.env_names:
            self._line(t + next(tick), "env-server", "INFO", f"Starting environment server {env}", env_name=env)

    def _begin_steps(self, t: float) -> None:
        slow = self.scenarios.get("image_pull_slow")
        if slow:
            took = t - (self.pods_scheduled_at or t)
            self._pod_event(t - 0.02, "INFO", f'Successfully pulled image "{self.image}" in {took:.1f}s '
                                              f"(image size 18.4 GB)")
            self._pod_event(t - 0.01, "INFO", "Started container {pod}")
        self._enter("stepping", t)
        self.last_step_t = t
        self.steps_began_at = t
        for env in self.env_names:
            self.env_status[env] = "Running"
        tick = iter(i * 0.01 for i in range(1000))
        if not self.sft or self.spec.eval_env_names:
            self._line(t + next(tick), "inference", "INFO", "Uvicorn running on http://0.0.0.0:8000")
        for env in self.env_names:
            self._line(t + next(tick), "env-server", "INFO", f"Environment server {env} listening on :8000",
                       env_name=env)
        if not self.sft:
            self._line(t + next(tick), "orchestrator", "INFO", "Inference server ready; starting rollouts")
        if self.current_step:
            self._line(t + next(tick), self.primary, "INFO", f"Resuming from checkpoint at step {self.current_step}")

    def _step(self, t: float) -> None:
        k = self.current_step + 1
        self.current_step, self.last_step_t = k, t
        self.step_times[k] = t
        spec = self.spec
        record = metrics_record(self.id, k, spec.max_steps, sft=self.sft, timestamp=self.iso(t),
                                step_seconds=self.step_seconds, batch_size=spec.batch_size,
                                learning_rate=spec.learning_rate, curves=self.scenarios)
        self.metrics = [m for m in self.metrics if m["step"] != k] + [record]
        tick = iter(i * 0.01 for i in range(1000))
        total = spec.max_steps or "?"
        if not self.sft:
            for env in self.spec.env_names:
                self._line(t + next(tick), "env-server", "INFO",
                           f"{env}: served {spec.batch_size or 64} rollouts for step {k}", env_name=env)
            self._line(t + next(tick), "inference", "INFO",
                       f"Avg prompt throughput: {record['throughput/tokens_per_sec'] / 3:.1f} tokens/s, "
                       f"Avg generation throughput: {record['throughput/tokens_per_sec']:.1f} tokens/s")
            if k % 9 == 0:
                self._line(t + next(tick), "inference", "WARNING", "KV cache usage 93%; preempting 4 requests")
            self._line(t + next(tick), "orchestrator", "INFO",
                       f"Step {k}/{total} | reward {record['reward/all/mean']:.4f} | "
                       f"seq_len {record['seq_len/mean']:.0f} | {record['time/step_seconds']:.1f}s")
            self._line(t + next(tick), "orchestrator", "INFO", f"{round(100 * k / (spec.max_steps or k))}%",
                       kind="progress")
            if k % 7 == 0:
                self._line(t + next(tick), "orchestrator", "WARNING",
                           f"Slow rollout batch at step {k}: 3 rollouts exceeded 30s")
        self._line(t + next(tick), "trainer", "INFO",
                   f"Step {k}/{total} | loss {record['loss']:.4f} | entropy {record['entropy']:.4f} | "
                   f"grad_norm {record['grad_norm']:.4f}", prefix="[rank0]: ")
        if k % 10 == 0:
            self._line(t + next(tick), "trainer", "DEBUG", f"Peak memory at step {k}: 61.2 GiB", prefix="[rank0]: ")
        if not self.sft:
            self._upload_train_traces(t, k)
        if self.eval_interval and k % self.eval_interval == 0:
            self._upload_eval_traces(t, k)
            if not self.sft:
                self._line(t + next(tick), "orchestrator", "INFO", f"Eval at step {k} uploaded")
        last = spec.max_steps is not None and k >= spec.max_steps
        if spec.ckpt_interval and k % spec.ckpt_interval == 0 or last and spec.ckpt_at_end:
            self._checkpoint(t, k)
            self._line(t + next(tick), "trainer", "INFO", f"Saved checkpoint at step {k}", prefix="[rank0]: ")
        if last:
            self._enter("finalizing", t)

    def _checkpoint(self, t: float, k: int) -> None:
        if any(c.step == k for c in self.checkpoints):
            return
        self.checkpoints.append(Checkpoint("c" + hex_id(self.id, "ckpt", k, self.attempt, length=24), k, t,
                                           self.timing.checkpoint_upload_seconds, self.checkpoint_bytes))

    def _fail(self, t: float) -> None:
        params = self.scenarios["fail"]
        step = self.current_step + 1
        self._enter("done", t, "FAILED")
        self.completed_at = t
        self.error_message = params["error_message"]
        evidence = params["evidence"] or ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
                                          "trainer container exited with code 137 (OOMKilled)"]
        if params["analysis"]:
            self.failure_analysis = {
                "rootCause": params["root_cause"] or f"CUDA OOM in trainer at step {step}",
                "evidence": list(evidence), "confidence": params["confidence"],
            }
        tick = iter(i * 0.01 for i in range(1000))
        for line in evidence:
            self._line(t + next(tick), "trainer", "ERROR", line, prefix="[rank0]: ")
        if not self.sft:
            self._line(t + next(tick), "orchestrator", "ERROR",
                       f"Trainer exited unexpectedly during step {step}: {self.error_message}")
        for env in self.env_names:
            self.env_status[env] = "Terminated"

    def _crash(self, t: float) -> None:
        self.crashed = True
        self.last_periodic = t
        self.periodic_count = 1
        env = self._crash_env()
        self.env_status[env] = "CrashLoopBackOff"
        module = env.replace("-", "_")
        self._line(t, "env-server", "ERROR", f"Environment server {env} crashed on start-up", env_name=env,
                   extra={"exception": f"Traceback (most recent call last):\n  File \"server.py\", line 12\n"
                                       f"ModuleNotFoundError: No module named '{module}'"})
        self._line(t + 0.01, "env-server", "ERROR",
                   f"Back-off restarting failed container env-server-{env} (restart 1)",
                   env_name=env)
        self._line(t + 0.02, "orchestrator", "WARNING", f"Env server {env} unreachable; rollouts paused")

    def _crash_tick(self, t: float) -> None:
        self.periodic_count += 1
        self.last_periodic = t
        env = self._crash_env()
        n = self.periodic_count
        self._line(t, "env-server", "ERROR",
                   f"ModuleNotFoundError: No module named '{env.replace('-', '_')}'", env_name=env)
        self._line(t + 0.01, "env-server", "ERROR",
                   f"Back-off restarting failed container env-server-{env} (restart {n})",
                   env_name=env)
        if n % 2 == 0:
            self._line(t + 0.02, "orchestrator", "WARNING", f"Still waiting for env server {env} ({n} attempts)")

    def _crash_env(self) -> str:
        wanted = self.scenarios["crash_loop"]["env_name"]
        names = self.env_names or ["env"]
        return wanted if wanted in names else names[0]

    def _complete(self, t: float) -> None:
        self._enter("done", t, "COMPLETED")
        self.completed_at = t
        self._line(t, self.primary, "SUCCESS", f"Training finished after {self.current_step} steps")
        for env in self.env_names:
            self.env_status[env] = "Completed"

    def _paused(self, t: float) -> None:
        self._enter("done", t, "PAUSED")
        self.notice = f"Paused at step {self.current_step}; resume with `prime train resume {self.id}`"
        if self.current_step:
            self._checkpoint(t, self.current_step)
        self._line(t, self.primary, "INFO", f"Paused at step {self.current_step}")
        for env in self.env_names:
            self.env_status[env] = "Terminated"

    # -- traces --------------------------------------------------------------------------
    def _room_for(self, n: int) -> bool:
        if self.trace_count + n > self.shape.max_traces_per_run:
            return False
        self.trace_count += n
        return True

    def _upload_train_traces(self, t: float, k: int) -> None:
        many = self.scenarios.get("many_traces")
        if many:  # generated on demand from the step times: nothing to store
            if self.bulk is None:
                self.bulk = self._bulk_traces(many)
                self.store.add_bulk(self.bulk)
            return
        missing = self.scenarios.get("missing_traces")
        if missing and k in missing["steps"]:
            return
        e_count, m_count = self.shape.episodes_per_step, self.shape.traces_per_episode
        if not self._room_for(e_count * m_count):
            return
        mean = reward_mean(self.id, k, self.spec.max_steps, self.scenarios)
        envs = self.spec.env_names or ["default"]
        context = {"source": "prime-rl", "run_type": "train"}
        self._upload(t, k, self.id, envs, e_count, m_count, mean, context, "train")

    def _bulk_traces(self, many: dict[str, Any]) -> BulkTraces:
        count = many["count"]
        trace_bytes = many["total_bytes"] // count if many["total_bytes"] else many["trace_bytes"]
        pl = self.placement
        return BulkTraces(
            run_id=self.id, user_id=pl.user_id, team_id=pl.team_id, count=count, trace_bytes=trace_bytes,
            per_episode=many["per_episode"], max_steps=self.spec.max_steps, step_times=self.step_times,
            landed=lambda k: k not in self.scenarios.get("missing_traces", {}).get("steps", ()),
            ingest_seconds=self.timing.trace_ingest_seconds, spread_seconds=0.5 * self.timing.step_seconds,
            envs=self.spec.env_names, model=self.spec.base_model or "",
            context={"source": "prime-rl", "run_type": "train"},
            mean_reward=lambda k: reward_mean(self.id, k, self.spec.max_steps, self.scenarios))

    def _upload_eval_traces(self, t: float, k: int) -> None:
        n = self.shape.eval_episodes
        if not self._room_for(n):
            return
        envs = self.spec.eval_env_names or self.spec.env_names or ["default"]
        mean = min(1.0, reward_mean(self.id, k, self.spec.max_steps, self.scenarios) + 0.05) if not self.sft else 0.5
        context = {"source": "prime-rl", "run_type": "eval", "train_run_id": self.id}
        self._upload(t, k, f"{self.id}-eval", envs, n, 1, mean, context, "eval")

    def _upload(self, t: float, k: int, run_id: str, envs: list[str], episodes: int, per_episode: int,
                mean: float, context: dict[str, str], kind: str) -> None:
        pl = self.placement
        for episode, traces in step_upload(
                run_id=run_id, step=k, attempt=self.attempt, kind=kind, at=t,
                ingested_at=t + self.timing.trace_ingest_seconds, spread_seconds=0.5 * self.timing.step_seconds,
                envs=envs, episodes=episodes, per_episode=per_episode, mean_reward=mean, context=context,
                model=self.spec.base_model or "", user_id=pl.user_id, team_id=pl.team_id):
            self.store.add(episode, traces)

    # -- interventions ---------------------------------------------------------------------
    def stop(self, now: float) -> None:
        """Stop (a no-op on a terminal or stopping run): STOPPED at once, or after a teardown of
        :attr:`stop_seconds` for a run whose pods exist; the status stays as it was meanwhile."""
        if self.status in TERMINAL or self.phase == "stopping":
            return
        seconds = self.stop_seconds if self.started_at is not None else 0.0
        self._line(now, self.primary, "INFO", "Stop requested; tearing down the run")
        if seconds <= 0:
            self._stopped(now)
            return
        self._enter("stopping", now)
        self.notice = f"Stopping: tearing down the run's pods (about {seconds:g} s)"
        for env in self.env_names:
            self.env_status[env] = "Terminating"

    def _stopped(self, t: float) -> None:
        self._enter("done", t, "STOPPED")
        self.completed_at = t
        self.notice = None
        for env in self.env_names:
            self.env_status[env] = "Terminated"

    def pause(self, now: float) -> None:
        """Start pausing a RUNNING run (409 otherwise): PAUSING, then PAUSED with a checkpoint."""
        if self.status != "RUNNING" or self.phase == "stopping":
            stopping = ", stopping" if self.phase == "stopping" else ""
            raise ApiError(409, f"Run is not RUNNING (status {self.status}{stopping})")
        self._enter("pausing", now, "PAUSING")
        self.notice = "Saving a checkpoint before pausing"
        self._line(now, self.primary, "INFO", "Pause requested; saving a checkpoint")

    def restart(self, now: float) -> None:
        """Restart a RUNNING run from its latest READY checkpoint (409 otherwise)."""
        if self.status != "RUNNING" or self.phase == "stopping":
            raise ApiError(409, f"Only RUNNING runs can be restarted (status {self.status}"
                                f"{', stopping' if self.phase == 'stopping' else ''})")
        ready = [c.step for c in self.checkpoints if c.status(now) == "READY"]
        back_to = max(ready) if ready else self.step_offset
        self.attempt += 1
        self.current_step = back_to
        self.metrics = [m for m in self.metrics if m["step"] <= back_to]
        self.step_times = {k: v for k, v in self.step_times.items() if k <= back_to}
        for name in CLEARED_BY_RESTART:
            self.scenarios.pop(name, None)
        self.crashed = False
        self.pods_scheduled_at, self.pull_events = None, 0
        self._enter("starting", now)
        for env in self.env_names:
            self.env_status[env] = "Pending"
        self._line(now, self.primary, "WARNING", f"Restart requested; restarting from step {back_to}")

    # -- reads ---------------------------------------------------------------------------
    @property
    def queue_seconds(self) -> float:
        """Seconds QUEUED: ``Timing.queue_seconds``, times :data:`BUSY_QUEUE_FACTOR` on a GPU type listed
        as not available now (the reference does not say how long; the emulator README says so)."""
        return self.timing.queue_seconds * (BUSY_QUEUE_FACTOR if self.placement.busy else 1)

    def runs_ahead(self, now: float) -> int | None:
        """Queue position while QUEUED."""
        if self.status != "QUEUED":
            return None
        if "stay_queued" in self.scenarios:
            return self.scenarios["stay_queued"]["runs_ahead"]
        remaining = self.phase_since + self.queue_seconds - now
        return max(1, math.ceil(remaining / 20.0))

    def to_wire(self, now: float, *, detail: bool = True) -> dict[str, Any]:
        """The ``RLRun`` object (camelCase; every key present)."""
        spec, pl = self.spec, self.placement
        queued = self.status == "QUEUED"
        reason = None
        if queued:
            reason = (self.scenarios.get("stay_queued") or {}).get("queue_reason") or \
                f"Waiting for {spec.gpu_count}x {pl.gpu_type} capacity" + (" (none free now)" if pl.busy else "")
        iso = self.iso
        return {
            "id": self.id, "name": self.name, "userId": pl.user_id, "teamId": pl.team_id,
            "rftClusterId": None, "primeClusterId": pl.cluster_id if self.started_at is not None else None,
            "status": self.status, "kind": "DEDICATED_FULL_FT", "loss": spec.loss, "teacher": None,
            "baseModel": spec.base_model, "environments": [dict(e) for e in spec.environments],
            "rolloutsPerExample": spec.rollouts_per_example, "seqLen": spec.seq_len, "maxSteps": spec.max_steps,
            "maxTokens": spec.max_tokens, "batchSize": spec.batch_size, "learningRate": spec.learning_rate,
            "gpuCount": spec.gpu_count, "volumeName": pl.volume_name if detail else None,
            "runConfig": self.config, "evalConfig": None, "valConfig": None,
            "wandbEntity": spec.wandb_entity, "wandbProject": spec.wandb_project, "wandbRunName": spec.wandb_run_name,
            "runsAhead": self.runs_ahead(now), "queueReason": reason, "notice": self.notice,
            "sourceCommit": pl.source_commit,
            "startedAt": iso(self.started_at) if self.started_at is not None else None,
            "completedAt": iso(self.completed_at) if self.completed_at is not None else None,
            "errorMessage": self.error_message, "failureAnalysis": self.failure_analysis,
            "createdAt": iso(self.created_at), "updatedAt": iso(self.updated_at),
        }

    def progress(self) -> dict[str, Any]:
        """``/progress``: latest step, steps with samples and distributions, last update."""
        latest = max(self.step_times) if self.step_times else None
        return {
            "latestStep": latest,
            "stepsWithSamples": self.samples_steps,
            "stepsWithDistributions": self.distribution_steps,
            "lastUpdatedAt": self.iso(self.step_times[latest]) if latest is not None else None,
        }

    def metric_records(self, min_step: int | None, max_step: int | None, limit: int | None) -> list[dict[str, Any]]:
        """``/metrics`` records, oldest first, filtered by step range, first ``limit``."""
        records = [m for m in sorted(self.metrics, key=lambda m: m["step"])
                   if (min_step is None or m["step"] >= min_step) and (max_step is None or m["step"] <= max_step)]
        return records[:limit] if limit is not None else records

    def step_at(self, t: float) -> int:
        """The step being trained at simulated time ``t`` (0 before the first)."""
        if self.steps_began_at is None or t < self.steps_began_at:
            return self.step_offset
        done = self.step_offset + int((t - self.steps_began_at) // self.step_seconds) + 1
        return min(done, self.spec.max_steps) if self.spec.max_steps else done

    @property
    def ended_at(self) -> float | None:
        """When the run stopped using its pods (a terminal state), else None."""
        return self.phase_since if self.phase == "done" else None

    def log_volume(self) -> LogVolume | None:
        """The generated lines of a ``long_run`` run (None otherwise, or before its pods started)."""
        params = self.scenarios.get("long_run")
        if params is None or self.started_at is None:
            return None
        key = (tuple(sorted(params.items())), self.started_at)
        if self._volume is None or self._volume[0] != key:
            self._volume = (key, LogVolume(
                run_id=self.id, start=self.started_at, hours=params["hours"], lines=params["lines"],
                errors=params["errors"], components=self.components, env_names=self.env_names, epoch=self.epoch,
                step_at=self.step_at, storm=params["storm"], storm_seconds=params["storm_seconds"]))
        return self._volume[1]

    def read_logs(self, now: float, params: dict[str, str]) -> str:
        """``/logs`` text; 404 while the run has not started."""
        if self.started_at is None:
            raise ApiError(404, f"Run is {self.status.lower()}; logs are not available yet")
        sources: list[LineSource] = [StoredLines(self.logs)]
        volume = self.log_volume()
        if volume is not None:
            sources.append(_Until(volume, self.ended_at))
        return query_logs(sources, now, params, primary=self.primary, env_names=self.env_names)

    def env_servers(self) -> list[dict[str, Any]]:
        """``/env-servers`` items (none before the pods exist)."""
        if self.started_at is None:
            return []
        return [{"env_name": env, "env_index": 0, "pod_name": self.pod_name("env-server", env),
                 "status": self.env_status.get(env, "Pending")} for env in self.env_names]

    def checkpoint_items(self, now: float, status_filter: str | None) -> list[dict[str, Any]]:
        """``/checkpoints`` items, oldest first."""
        items = []
        for c in sorted(self.checkpoints, key=lambda c: c.step):
            status = c.status(now)
            if status_filter and status != status_filter.upper():
                continue
            items.append({"id": c.id, "rftRunId": self.id, "step": c.step,
                          "storageUrl": f"s3://prime-ckpt-emulator/{self.id}/step_{c.step}", "status": status,
                          "sizeBytes": c.size_bytes, "createdAt": self.iso(c.created_at),
                          "uploadedAt": self.iso(c.created_at + c.upload_seconds) if status == "READY" else None})
        return items

    @property
    def _samples_per_step(self) -> int:
        return min(self.spec.batch_size or 32, 32)

    def _sample_rewards(self, step: int, n: int) -> list[float]:
        r = rng(self.id, "samples", step)
        mean = reward_mean(self.id, step, self.spec.max_steps, self.scenarios)
        return [round(min(1.0, max(0.0, r.gauss(mean, 0.15))), 4) for _ in range(n)]

    def samples(self, step: int, page: int, limit: int) -> dict[str, Any]:
        """``/samples`` page for one step (empty unless the step has samples)."""
        total = self._samples_per_step if step in self.samples_steps else 0
        rewards = self._sample_rewards(step, total)
        group = self.spec.rollouts_per_example or 1
        items = []
        for i in range((page - 1) * limit, min(total, page * limit)):
            prompt, completion = rollout_text((self.id, "sample", step, i), (self.spec.env_names or ["env"])[0])
            items.append({"step": step, "exampleId": i // group, "rolloutIndex": i % group, "prompt": prompt,
                          "completion": completion, "reward": rewards[i],
                          "advantage": round(rewards[i] - sum(rewards) / total, 4)})
        return {"run_id": self.id, "samples": items, "total": total, "page": page, "limit": limit,
                "total_pages": math.ceil(total / limit) if total else 0}

    def distribution(self, kind: str, step: int | None) -> dict[str, Any]:
        """``/distributions``: a histogram of ``rewards`` or ``advantages`` at a step."""
        if kind not in ("rewards", "advantages"):
            raise ApiError(400, f"Unknown distribution type '{kind}'. Use rewards or advantages.")
        steps = self.distribution_steps
        if step is None:
            step = steps[-1] if steps else None
        if step is None or step not in steps:
            return {"chartData": {"histogramData": []}, "step": step, "type": kind}
        values = self._sample_rewards(step, self._samples_per_step)  # the rollouts /samples serves
        if kind == "advantages":  # reward minus the mean, as /samples gives each rollout's (negative ones too)
            mean = sum(values) / len(values)
            values = [round(v - mean, 4) for v in values]
        return {"chartData": {"histogramData": histogram(values, lo=-1.0 if kind == "advantages" else 0.0)},
                "step": step, "type": kind}

    def billed_seconds(self, now: float) -> float:
        """Seconds the run has held billed GPUs by ``now`` (:data:`BILLED_PHASES`): prorated to the
        second; queue, start-up (image pull) and a pause cost nothing (docs/hosted-training/billing)."""
        current = max(0.0, now - self.phase_since) if self.phase in BILLED_PHASES else 0.0
        return self.billed_before + current

    def usage(self, now: float) -> dict[str, Any]:
        """``/billing/runs/{id}/usage`` (snake_case ``RunUsage``): see :func:`~skill.emulator.billing.run_usage`,
        for the billed seconds at the rate fixed when the run was created (price per GPU-hour x GPUs)."""
        pl = self.placement
        hourly = pl.price_per_gpu_hour * self.spec.gpu_count if pl.price_per_gpu_hour is not None else None
        return run_usage(run_id=self.id, run_name=self.name, base_model=self.spec.base_model, status=self.status,
                         running_seconds=self.billed_seconds(now), usd_per_hour=hourly, sft=self.sft)


class _Until:
    """A line source cut at the run's end (generated lines stop when the pods go)."""

    def __init__(self, source: LineSource, end: float | None) -> None:
        self.source, self.end = source, end

    def lines_desc(self, component: str, env_name: str | None, lo: float, hi: float,
                   level: str | None) -> Iterator[LogLine]:
        return self.source.lines_desc(component, env_name, lo, hi if self.end is None else min(hi, self.end), level)

