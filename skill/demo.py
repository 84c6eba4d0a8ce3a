"""``model-factory demo [--scenario NAME]``: the whole workflow on the local emulator, no account,
into a healthy run or a run in trouble, and the tools' diagnosis of it.

preflight -> validate -> plan -> approval (the demo's automatic approval is a host-callback
channel and is shown as such) -> dispatch -> monitor (``mf_wait_for_run`` slices and
``mf_check_progress``) until the scenario's verdict (or any sign of trouble, or the end of the run)
-> for a run that ends, download its traces.
Every step goes through :func:`skill.registry.call_tool`, the path agents use. The config is the
bundled, verbatim prime-rl ``examples/basic/reverse-text/rl.toml`` (the ``sft`` scenario:
``examples/basic/wordle/sft.toml``).

Scenarios (:data:`SCENARIOS`): names for people, each mapped to one of the emulator's
(``skill/emulator/README.md``), with the verdict the demo stops at. The diagnosis is the tools':
``mf_check_progress``'s verdict and evidence, and for ``missing-traces`` the download's
missing-upload report. The learning scenarios (learning, flat, saturated, entropy-collapse, kl-spike,
trainer-bound, orchestrator-bound, sft) run to the end and show the learning verdict with the finding
they expect (:attr:`Scenario.expects`).

Which emulator: when ``PRIME_API_BASE_URL`` points at a running emulator on loopback (its admin
route answers), the demo uses it, so the commands it prints keep working afterwards in that shell
(``model-factory emulator`` prints the exports; when the shell lacks them, the emulator's key or traces host,
the demo's closing text names them and prints that export line: :func:`shell_lacks`).
Otherwise an emulator runs in this process and stops with the demo, and when the variable is set
the demo says first why it did not use it (a host that is not the loopback, a wildcard address
such as ``0.0.0.0`` with the loopback URL that reaches it, no emulator answering:
:func:`running_emulator`). Never anything else: the demo does not talk to the real platform
(refusing to run would guard nothing more: the variable is not used, the embedded emulator is).

Whichever it is, the demo's own waits move the emulator's clock (:class:`DemoTime`, ``--speed`` simulated seconds
per second waited; a person's emulator keeps its own speed besides): what the demo shows does not depend on how
busy the machine is.

Which state folder (plans, approvals, the audit trail): the person's own, per user
(``$MODEL_FACTORY_STATE_DIR``, else ``~/.local/state/model-factory``), so ``model-factory history``
shows every call the demo made and the commands it prints afterwards (run-report's cost against the
plan, list-launches) find its plan. Its records are kept under the demo emulator's own URL, so they
never mix with the platform's. ``HOME`` is a temporary folder (the person's prime config is not
read), removed on every way out: the end, an error, Ctrl-C, SIGTERM (:func:`_scratch`).

A stalled run's logs are read as check-progress says next (``mf_summarize_logs``: every component,
since the run started), and the diagnosis says whether they explain the stall and what to do
(:func:`stall_finding`). Interrupted (Ctrl-C, SIGTERM) on a person's emulator, the demo stops the
run it launched there, or prints the command that does (:func:`_interrupted`); the launch request
itself is not cut in the middle (:func:`_interrupts_held`).

Output: progress on stderr; the outcome (what happened, the evidence, the next commands) on
stdout; ``--json``: one object with ``scenario``, ``emulator`` (its URL), ``embedded_emulator``,
``base_url_ignored`` (why PRIME_API_BASE_URL was not used, or null), ``state_dir`` (the state folder
holding its plan and calls), ``verdict``, ``reached``, ``evidence``, ``status``,
``run_id``, ``plan_id``, ``steps_completed``,
``next_step``/``next_calls``, ``timeline``, for a stall ``logs`` (``finding``, ``distinct_errors``,
``covers_whole_run``, ``next_step``, ``next_calls``) and, when traces were downloaded,
``traces_downloaded``, ``dest``, ``missing``; interrupted, ``status`` INTERRUPTED with ``run_id``,
``run_stopped`` and ``next_calls``. Exit 0 when the scenario's verdict was reached, 1 otherwise,
130 interrupted (Ctrl-C), 143 terminated (SIGTERM), after the same clean-up.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from skill import registry, render, terminal
from skill.exit_codes import interrupt_for
from tools.configs import EXAMPLES_DIR
from tools.core import STATE_DIR_ENV
from tools.errors import Call, ToolError, call
from tools.guardrails.store import state_folder
from tools.guardrails.text import shown
from tools.units import usd

DEMO_CONFIG = EXAMPLES_DIR / "basic" / "reverse-text" / "rl.toml"
SFT_CONFIG = EXAMPLES_DIR / "basic" / "wordle" / "sft.toml"
DEFAULT_SPEED = 100.0
WAIT_SLICE_SECONDS = 1
#: Seconds (of the demo's clock: wall seconds on a person's emulator) the monitor loop may take at most.
MONITOR_DEADLINE_SECONDS = 300
#: Waits in a row that may fail with a retryable error (a read that outlasted the one-second wait) before the
#: demo stops at it.
WAIT_RETRIES = 3
#: Wall seconds an interrupted demo's stop of its run may take in all (its requests and the wait for STOPPED).
STOP_SECONDS = 5
_TERMINAL = frozenset({"completed", "failed", "stopped", "paused"})
#: Verdicts that end any demo (the run is in trouble), expected or not.
_TROUBLE = frozenset({"stalled", "failing", "crash_looping", "image_pull_failing"})


@dataclass(frozen=True)
class Scenario:
    """A demo scenario: the emulator scenario it applies (None: a healthy run), the verdicts the
    demo stops at, whether the traces are downloaded, what it shows, in words, the learning verdict or
    finding (a signal of ``learning.findings``) it expects, and its config."""

    emulator: str | None
    stop_at: frozenset[str]
    shows: str
    download: bool = False
    expects: str | None = None
    config: Path = DEMO_CONFIG

    def learned(self, progress: Any) -> bool:
        """Whether ``progress`` (a check-progress result) shows what the scenario expects of its learning."""
        learning = getattr(progress, "learning", None)
        if self.expects is None:
            return True
        return learning is not None and (learning.verdict == self.expects or any(
            f.signal == self.expects for f in learning.findings))


SCENARIOS: dict[str, Scenario] = {
    "healthy": Scenario(None, _TERMINAL, "a run that trains to COMPLETED; its traces are downloaded", True),
    "stalled": Scenario("stall", frozenset({"stalled"}), "a RUNNING run that stops making steps"),
    "crash-loop": Scenario("crash_loop", frozenset({"crash_looping"}), "an environment server that keeps crashing"),
    "failed": Scenario("fail", frozenset({"failed"}), "a run that fails (trainer out of memory), with the platform's "
                       "failure analysis"),
    "queued": Scenario("stay_queued", frozenset({"queued"}), "a run that waits for GPU capacity"),
    "missing-traces": Scenario("missing_traces", _TERMINAL, "a run that completes while one step's traces never "
                               "land; the download reports them", True),
    "image-pull-slow": Scenario("image_pull_slow", frozenset({"progressing"}), "a slow start-up (the image pull "
                                "takes minutes), then training"),
    "image-pull-backoff": Scenario("image_pull_backoff", frozenset({"image_pull_failing", "failed"}),
                                   "an image that cannot be pulled: the pods never start"),
    "learning": Scenario("learning", _TERMINAL, "a run whose reward rises: the learning verdict, a trend with its "
                         "uncertainty", expects="learning"),
    "flat": Scenario("flat", _TERMINAL, "a run whose reward stays flat: it does not learn", expects="flat"),
    "saturated": Scenario("saturated", _TERMINAL, "every rollout scores 1: nothing to learn from",
                          expects="saturated"),
    "entropy-collapse": Scenario("entropy_collapse", _TERMINAL, "the policy's entropy collapses",
                                 expects="entropy_collapse"),
    "kl-spike": Scenario("kl_spike", _TERMINAL, "mismatch_kl and grad_norm spike at one step",
                         expects="mismatch_kl_spike"),
    "trainer-bound": Scenario("trainer_bound", _TERMINAL, "the orchestrator waits for the trainer: where the "
                              "time goes", expects="orchestrator_waits"),
    "orchestrator-bound": Scenario("orchestrator_bound", _TERMINAL, "the trainer waits for the orchestrator's "
                                   "batches", expects="trainer_waits"),
    "sft": Scenario("sft_eval_loss", _TERMINAL, "an SFT run with an eval loss: a loss, no reward and no traces",
                    expects="learning", config=SFT_CONFIG),
}


class DemoFailed(Exception):
    """A demo step returned a ToolError (carried in ``error``)."""

    def __init__(self, step: str, error: Any) -> None:
        super().__init__(f"{step}: [{error.code}] {error.message}")
        self.step = step
        self.error = error


def _call(step: str, name: str, arguments: dict[str, Any], ctx: Any) -> Any:
    result = registry.call_tool(name, arguments, ctx, surface="demo")
    if getattr(result, "error", False) is True:
        raise DemoFailed(step, result)
    return result


# -- which emulator ---------------------------------------------------------------------------


@dataclass
class _Emulator:
    """The emulator the demo talks to: ``base_url``, ``api_key``, whether it is embedded, why
    ``PRIME_API_BASE_URL`` was not used (``ignored``; None when unset or used), and how to give the
    next run a scenario."""

    base_url: str
    api_key: str
    embedded: bool
    server: Any = None
    ignored: str | None = None

    def advance(self, seconds: float) -> None:
        """Move the emulator's clock ``seconds`` (simulated) ahead. On a person's emulator that no longer answers
        nothing moves: the demo's next call says the emulator is unreachable."""
        if self.server is not None:
            self.server.state.advance(seconds)
            return
        import httpx

        try:
            httpx.post(f"{self.base_url}/_emulator/advance", json={"seconds": seconds}, timeout=5)
        except httpx.HTTPError:
            pass

    def set_scenario(self, name: str) -> None:
        if self.server is not None:
            self.server.state.set_scenario(name)
        else:
            import httpx

            httpx.post(f"{self.base_url}/_emulator/scenario", json={"name": name}, timeout=10).raise_for_status()


def running_emulator(env: dict[str, str] | os._Environ[str]) -> tuple[str | None, str | None]:
    """``(url, None)`` when ``PRIME_API_BASE_URL`` is a loopback URL where an emulator answers its
    admin route (``GET /_emulator/state``); else ``(None, why it is not used)``, the reason None when
    the variable is unset. Never a remote host: the demo launches runs and approves them itself. The
    variable is the emulator's root URL (a trailing ``/api/v1`` is dropped, as every command does:
    :func:`~tools.platform.settings.strip_api_v1`); another path is named as the problem. The reason
    names the host, port and path only (never credentials or a query in the URL)."""
    from skill.emulator import is_loopback, local_url
    from tools.platform.settings import strip_api_v1

    url = strip_api_v1((env.get("PRIME_API_BASE_URL") or "").strip())
    if not url:
        return None, None
    parts = urlsplit(url)
    try:
        host, port = shown(parts.hostname or ""), parts.port
    except ValueError:
        return None, "it holds no valid port."
    where = f"{host}:{port}" if port else host or "no host"
    if not is_loopback(host):
        reached = local_url(host, port) if port else ""
        if is_loopback(urlsplit(reached).hostname or ""):  # 0.0.0.0, ::: where an emulator listens
            return None, (f"it names {where}, an address an emulator listens on (every interface), not one to "
                          f"reach it at: this machine reaches it at {reached} (the URL of the export line "
                          "`model-factory emulator` prints).")
        return None, (f"it names {where}, not this machine's loopback, and the demo runs only on an emulator on "
                      "this machine, never on a remote host or the platform.")
    if parts.path.strip("/"):
        root = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"
        return None, (f"it has the path {shown(parts.path)} after {where}: the variable is the emulator's root URL, "
                      f"{shown(root)} (as in the export line `model-factory emulator` prints), with no path.")
    import httpx

    try:
        answer = httpx.get(f"{url}/_emulator/state", timeout=5)
        if answer.status_code == 200 and "run_count" in answer.json():
            return url, None
    except (httpx.HTTPError, ValueError):
        pass
    return None, (f"no emulator answers at {where} (is `model-factory emulator` still running there?).")


class DemoTime:
    """The demo's clock and sleep (``Context(clock=..., sleep=...)``): the emulator's simulated time moves with
    the demo's own waits, ``speed`` simulated seconds per second waited (``advance(seconds)`` moves it). What the
    demo shows is then the same on a busy machine as on a quiet one: a slow request does not let the run race
    ahead. ``pace``: each wait also takes its time on the wall clock, for a person watching; without it the
    demo runs as fast as the machine allows (tests)."""

    def __init__(self, advance: Callable[[float], None], speed: float, *, pace: bool = True) -> None:
        self.advance, self.speed, self.pace, self.now = advance, speed, pace, 0.0

    def clock(self) -> float:
        """Seconds waited so far."""
        return self.now

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (on the wall clock only when pacing) and move the emulator ``seconds * speed`` ahead."""
        seconds = max(0.0, seconds)
        if self.pace:
            time.sleep(seconds)
        self.now += seconds
        self.advance(seconds * self.speed)


@contextlib.contextmanager
def _emulator() -> Iterator[_Emulator]:
    from skill.emulator import DEFAULT_API_KEY, EmulatorServer

    url, ignored = running_emulator(os.environ)
    if url is not None:  # its own speed is kept: the demo's waits move its clock further (DemoTime)
        yield _Emulator(url, os.environ.get("PRIME_API_KEY") or DEFAULT_API_KEY, embedded=False)
        return
    with EmulatorServer(speed=0) as server:  # its clock moves with the demo's waits (DemoTime)
        yield _Emulator(server.base_url, server.api_key, embedded=True, server=server, ignored=ignored)


# -- the demo ---------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What the demo found: the last progress check and, when downloaded, the traces."""

    scenario: str
    emulator: str = ""
    embedded: bool = True
    run_id: str = ""
    plan_id: str = ""
    progress: Any = None
    download: Any = None
    logs: Any = None
    final_reward: float | None = None
    timeline: list[dict[str, Any]] = field(default_factory=list)
    dispatching: bool = False
    #: The state folder holding the demo's plan, kept after it (a person's emulator); None: a temporary one.
    state_dir: str | None = None
    #: Why PRIME_API_BASE_URL was not used (the demo then runs its own emulator); None: unset, or used.
    ignored: str | None = None

    def as_json(self) -> dict[str, Any]:
        p = self.progress
        out: dict[str, Any] = {
            "scenario": self.scenario, "emulator": self.emulator, "embedded_emulator": self.embedded,
            "run_id": self.run_id, "plan_id": self.plan_id, "status": p.status,
            "verdict": p.verdict, "reached": _reached(self.scenario, p),
            "learning": p.learning.model_dump(exclude_none=True) if p.learning else None,
            "evidence": list(p.evidence), "steps_completed": p.latest_step, "max_steps": p.max_steps,
            "final_reward": self.final_reward, "failure_analysis": p.failure_analysis.model_dump()
            if p.failure_analysis else None, "env_servers": [e.model_dump() for e in p.env_servers],
            "next_step": p.next_step, "next_calls": [c.model_dump() for c in p.next_calls], "timeline": self.timeline,
            "approval_channel": "host_callback (demo auto-approval)", "state_dir": self.state_dir,
            "base_url_ignored": self.ignored}
        finding = stall_finding(self)
        if finding is not None:
            text, step, calls = finding
            out["logs"] = {"finding": text, "distinct_errors": len(self.logs.errors),
                           "covers_whole_run": self.logs.covers_whole_run, "next_step": step,
                           "next_calls": [c.model_dump() for c in calls]}
        if self.download is not None:
            d = self.download
            out.update(traces_downloaded=d.traces_downloaded, dest=d.dest, traces_complete=d.complete,
                       missing=d.missing.model_dump())
            if not d.complete and d.missing.summary:
                out["evidence"].append(d.missing.summary)
        return out


def run_demo(*, as_json: bool = False, dest: Path | None = None, speed: float | None = None,
             scenario: str = "healthy", pace: bool = True) -> int:
    """Run the demo of ``scenario``; progress on stderr, the outcome on stdout. Returns the exit code
    (0: the scenario's verdict was reached). The emulator's clock moves with the demo's waits, ``speed``
    simulated seconds per second waited (default :data:`DEFAULT_SPEED`; :class:`DemoTime`); ``pace`` False:
    the waits take no wall time."""
    from tools.core import Context

    err = terminal.stderr()

    def say(text: str, indent: str = "") -> None:
        for line in terminal.wrap(text, err.width, indent + "   ", indent, commands=True):
            err.print(line)

    def approver(request: Any) -> bool:
        if request.action != "stop":  # a stop: the demo's own run after Ctrl-C, said before it (_interrupted)
            say("4. Approve: automatic in the demo (channel: host callback). With a real account a person approves "
                "here, or runs the approve command the plan prints.")
        return True

    outcome = Outcome(scenario)
    speed = speed or DEFAULT_SPEED
    with _emulator() as emu, _scratch() as scratch:
        outcome.emulator, outcome.embedded, outcome.ignored = emu.base_url, emu.embedded, emu.ignored
        home = scratch / "home"
        home.mkdir()
        env = {"PRIME_API_KEY": emu.api_key, "PRIME_API_BASE_URL": emu.base_url, "PRIME_TRACES_URL": emu.base_url,
               "PRIME_FRONTEND_URL": emu.base_url, "PRIME_DISABLE_VERSION_CHECK": "1", "HOME": str(home),
               "PATH": os.environ.get("PATH", "")}
        if os.environ.get(STATE_DIR_ENV, "").strip():
            env[STATE_DIR_ENV] = os.environ[STATE_DIR_ENV]
        # the person's own state store (not the temporary HOME's): history shows the demo's calls
        demo_time = DemoTime(emu.advance, speed, pace=pace)
        ctx = Context(env=env, home=home, state_dir=state_folder(os.environ, None), approver=approver,
                      clock=demo_time.clock, sleep=demo_time.sleep)
        outcome.state_dir = str(ctx.state_path().resolve())
        try:
            _workflow(ctx, say, emu, dest, outcome)
        except DemoFailed as failed:
            say(f"Demo stopped at {failed.step}: [{failed.error.code}] {failed.error.message}")
            say(f"Fix: {render.for_people(failed.error.fix, failed.error.next_calls)}")
            if as_json:
                print(json.dumps({"scenario": scenario, "status": "DEMO_FAILED", "step": failed.step,
                                  "error": failed.error.model_dump()}))
            return 1
        except KeyboardInterrupt:
            _interrupted(ctx, emu, outcome, say, as_json)
            raise
        finally:
            ctx.close()
    reached = _reached(scenario, outcome.progress)
    if as_json:
        print(json.dumps(outcome.as_json()))
    else:
        _show(outcome, emu, reached)
    return 0 if reached else 1


def _reached(scenario: str, progress: Any) -> bool:
    """Whether the demo of ``scenario`` reached what it shows: its verdict, and its learning finding."""
    sc = SCENARIOS[scenario]
    return progress.verdict in sc.stop_at and sc.learned(progress)


@contextlib.contextmanager
def _scratch() -> Iterator[Path]:
    """A temporary folder (the demo's ``HOME``; its state folder on the embedded emulator), removed on every way
    out of the block: its end, an error, Ctrl-C or SIGTERM (a KeyboardInterrupt, :func:`skill.cli.main`). The
    removal itself is not cut by an interrupt (:func:`_interrupts_held`), so nothing is left half removed."""
    folder = Path(tempfile.mkdtemp(prefix="model-factory-demo-"))
    try:
        yield folder
    finally:
        with _interrupts_held():
            shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def _interrupts_held() -> Iterator[None]:
    """Ctrl-C (or SIGTERM) during the block waits for its end: a launch then either was not sent or has
    its run id, which an interrupted demo stops. A second one goes through at once (a person who insists).
    In the main thread only (signal handlers live there)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []

    def hold(signum: int, frame: Any) -> None:
        if held:
            raise interrupt_for(signum)
        held.append(signum)

    before = {sig: signal.signal(sig, hold) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
    if held:
        raise interrupt_for(held[0])  # SIGTERM stays SIGTERM: the exit code says which (skill.exit_codes)


def _interrupted(ctx: Any, emu: _Emulator, outcome: Outcome, say: Any, as_json: bool) -> None:
    """After Ctrl-C: a run the demo launched on a person's emulator (one it did not start itself) is
    stopped with ``mf_stop_run`` (the demo owns the run, the emulator bills nobody; the stop is
    approved automatically, as the launch was), said before its first request, its requests and wait
    bounded by :data:`STOP_SECONDS` in all (:meth:`tools.core.Context.within`); when that fails (an
    emulator that no longer answers, a refusal), the command that stops it is printed. An embedded
    emulator ends with the demo, and its runs with it. Under ``--json`` one object: ``status``
    INTERRUPTED, ``run_id``, ``run_stopped``, ``next_calls``."""
    stopped, calls = False, []
    if not emu.embedded and outcome.run_id:
        ctx.close()  # a request cut by the interrupt may have left a connection half-read: new ones
        stop = call("mf_stop_run", run_id=outcome.run_id)
        say(f"Interrupted: stopping run {outcome.run_id}, which the demo launched on your emulator (approved "
            f"automatically, as its launch was; at most {STOP_SECONDS} s).")
        try:
            with ctx.within(STOP_SECONDS):  # a frozen emulator: the command that stops it, soon
                result = registry.call_tool("mf_stop_run", {"run_id": outcome.run_id,
                                                            "timeout_seconds": STOP_SECONDS}, ctx, surface="demo")
            # still tearing down: the stop may not have been taken (its answer can be lost), so say how to stop it
            message = str(getattr(result, "message", ""))
            failed = registry.is_error(result) or getattr(result, "outcome", None) == "still_tearing_down"
            problem = message if failed else None
        except KeyboardInterrupt:  # interrupted again: leave it to the person
            problem = "the stop was interrupted"
        stopped = problem is None
        if problem is None:
            say(message)
        else:
            calls = [stop]
            say(render.for_people(f"Run {outcome.run_id}, which the demo launched on your emulator at {emu.base_url}, "
                                  f"may still be running; the demo's stop: {problem.rstrip('.')}. Stop it with "
                                  f"{stop}.", calls))
    elif not emu.embedded and outcome.dispatching:
        calls = [call("mf_list_runs")]
        say(render.for_people(f"Interrupted while launching plan {outcome.plan_id}: a run may have been created on "
                              f"your emulator at {emu.base_url}. {calls[0]} lists its runs, newest first; stop that "
                              "one with the stop-run command and its id.", calls))
    if as_json:
        print(json.dumps({"scenario": outcome.scenario, "status": "INTERRUPTED", "emulator": emu.base_url,
                          "embedded_emulator": emu.embedded, "run_id": outcome.run_id or None,
                          "run_stopped": stopped, "next_calls": [c.model_dump() for c in calls]}))


def _workflow(ctx: Any, say: Any, emu: _Emulator, dest: Path | None, outcome: Outcome) -> None:
    sc = SCENARIOS[outcome.scenario]
    where = "in this process; it stops with the demo" if emu.embedded else "yours, from PRIME_API_BASE_URL"
    if emu.ignored:
        say(render.for_people(f"PRIME_API_BASE_URL is not used: {emu.ignored}"))
    say(f"Emulator at {emu.base_url} ({where}). Scenario {outcome.scenario}: {sc.shows}.")

    pre = _call("preflight", "mf_preflight", {}, ctx)
    say(f"1. Preflight: {'ready' if pre.ok else 'problems'}; the plan names the owner (personal account).")

    config = sc.config
    report = _call("validate", "mf_validate_config", {"config_path": str(config)}, ctx)
    say(f"2. Validate {config.parent.name}/{config.name}: {'valid' if report.valid else 'not valid'} "
        f"({report.mode.upper()}), {len(report.errors)} errors, {len(report.warnings)} warnings.")
    if report.valid is not True:
        raise DemoFailed("validate", ToolError(code="invalid_config", message="; ".join(
            e.message for e in report.errors), fix="Validate the config: mf_validate_config."))

    plan = _call("plan", "mf_plan_run", {"config_path": str(config), "team": "personal"}, ctx)
    cost = plan.cost
    money = f"{usd(cost.usd_low)} to {usd(cost.usd_high)}" if cost.usd_low is not None else "cost unknown"
    say(f"3. Plan {plan.plan_id}: {plan.gpu_count}x {plan.gpu_type}, {plan.max_steps} steps, {money} "
        "(nothing spent yet).")
    outcome.plan_id = plan.plan_id

    if sc.emulator:
        emu.set_scenario(sc.emulator)
    outcome.dispatching = True
    with _interrupts_held():  # its run id known, an interrupted demo can stop the run it launched
        dispatched = _call("dispatch", "mf_dispatch_run", {"plan_id": plan.plan_id}, ctx)
        run_id = outcome.run_id = dispatched.run_id
    outcome.dispatching = False
    say(f"5. Dispatch: run {run_id} {dispatched.status}.")

    say("6. Monitor (wait-for-run for a second, then check-progress):")
    deadline = ctx.clock() + MONITOR_DEADLINE_SECONDS
    troubled = retried = 0
    while True:
        try:
            _call("monitor", "mf_wait_for_run", {"run_id": run_id, "timeout_seconds": WAIT_SLICE_SECONDS}, ctx)
        except DemoFailed as failed:  # a read slower than the short wait on a busy machine: the next wait reads again
            if not failed.error.retryable or retried >= WAIT_RETRIES:
                raise
            retried += 1
            continue
        retried = 0
        progress = _call("monitor", "mf_check_progress", {"run_id": run_id}, ctx)
        outcome.progress = progress
        point = {"verdict": progress.verdict, "status": progress.status, "step": progress.latest_step}
        if not outcome.timeline or outcome.timeline[-1] != point:
            outcome.timeline.append(point)
            say(f"{progress.status}, step {progress.latest_step or 0}/{progress.max_steps or '?'}: "
                f"{progress.verdict.replace('_', ' ')}", "   ")

        if progress.verdict in sc.stop_at or progress.terminal or ctx.clock() > deadline:
            break
        # Trouble the scenario does not expect ends the demo when the next check agrees: the emulator's
        # clock runs fast, so one check can read the pods before a change and the logs after it.
        troubled = troubled + 1 if progress.verdict in _TROUBLE else 0
        if troubled >= 2:
            break

    if progress.verdict == "stalled":  # what check-progress names next: do the logs say why?
        outcome.logs = _call("logs", "mf_summarize_logs", {"run_id": run_id}, ctx)
    if progress.verdict in ("completed", "stopped", "failed") and progress.latest_step and report.mode != "sft":
        metrics = _call("metrics", "mf_get_metrics", {"run_id": run_id}, ctx)
        key = progress.learning.metric if progress.learning and progress.learning.metric else "reward/all/mean"
        outcome.final_reward = metrics.final.get(key)
    if sc.download and progress.terminal:
        target = dest or Path.cwd() / "model-factory-demo" / run_id
        say(f"7. Traces: downloading to {target}")
        outcome.download = _call("traces", "mf_download_traces", {"run_id": run_id, "dest": str(target)}, ctx)


def _show(outcome: Outcome, emu: _Emulator, reached: bool) -> None:
    """The outcome for a person: check-progress's view (verdict, evidence, next commands), the
    download's when traces were fetched, and how to keep using the commands."""
    p = outcome.progress
    view = render.view_of("mf_check_progress", p)
    head = f"Demo {outcome.scenario}: " + ("the tools' diagnosis." if reached else
                                          f"the run ended before the expected verdict ({p.verdict}).")
    view.opening.insert(0, head)
    if outcome.final_reward is not None:
        view.facts.insert(0, ("final_reward", outcome.final_reward))
    finding = stall_finding(outcome)
    if finding is not None:  # the logs were read as check-progress said: what they say replaces its hint
        text, step, calls = finding
        view.opening.append(text)
        view.next = [(step, calls)]
    render.show(view)
    if outcome.download is not None:
        render.show(render.view_of("mf_download_traces", outcome.download))
    err = terminal.stderr()
    if emu.embedded:
        again = f"model-factory demo --scenario {outcome.scenario}"
        note = ("The commands above talk to the demo's emulator, which stopped with the demo. To try them: run "
                "`model-factory emulator` in another terminal, paste the export line it prints here, then "
                f"`{again}` again: it uses that emulator, and its commands keep working.")
    else:
        from skill.emulator import export_line

        report = call("mf_run_report", run_id=outcome.run_id)
        lacking = shell_lacks(os.environ, emu)
        works = ("the commands above work in this shell, from any folder" if not lacking else
                 f"the commands above need {', '.join(lacking)} set for that emulator, which this shell lacks: "
                 f"paste `{export_line(emu.base_url)}` here first; then they work from any folder")
        note = (f"The run stays on your emulator at {emu.base_url} and its plan in the state folder "
                f"{outcome.state_dir}: {works}, and {report} compares its cost with the plan.")
    for line in terminal.wrap(render.for_people(note, [] if emu.embedded else [report]), err.width, commands=True):
        err.print(line)



def shell_lacks(env: dict[str, str] | os._Environ[str], emu: _Emulator) -> list[str]:
    """The variables a command pasted into the shell of ``env`` lacks to reach the demo's emulator as the demo did
    (names only, never values): ``PRIME_API_KEY`` when the key the commands would use (that variable, else the
    prime config's, :func:`tools.platform.settings.resolve_settings`) is not the demo's, ``PRIME_TRACES_URL`` /
    ``PRIME_FRONTEND_URL`` when the traces host / dashboard would not be the emulator (the platform's by
    default). Empty: the printed commands work there."""
    from tools.platform.settings import resolve_settings

    settings = resolve_settings(env=env)
    return [name for name, lacks in (("PRIME_API_KEY", settings.api_key.get_secret_value() != emu.api_key),
                                     ("PRIME_TRACES_URL", settings.traces_url != emu.base_url),
                                     ("PRIME_FRONTEND_URL", settings.frontend_url != emu.base_url)) if lacks]


# -- what the logs say about a stall ----------------------------------------------------------------


def stall_finding(outcome: Outcome) -> tuple[str, str, list[Call]] | None:
    """What ``mf_summarize_logs`` (every component, since the run started) found about a stalled run:
    ``(finding, next_step, next_calls)``: whether its logs explain the stall, in words, then what to
    do (None: no stall, or its logs were not read)."""
    logs = outcome.logs
    if logs is None:
        return None
    run_id = outcome.run_id
    summary, stop = call("mf_summarize_logs", run_id=run_id), call("mf_stop_run", run_id=run_id)
    stop_it = f"stop the run so it stops costing money: {stop} (a person approves the stop)"
    if logs.errors:
        top = max(logs.errors, key=lambda s: s.count)
        hint, calls = render.view_of("mf_summarize_logs", logs).next[0]  # the most frequent error's lines
        return (f"The logs may explain the stall: {len(logs.errors)} distinct error(s) since the run started; the "
                f"most frequent, {top.count}x in {top.component}: {top.pattern}",
                f"{hint} If the run does not recover, {stop_it}.", [*calls, stop])
    if logs.covers_whole_run:
        tail = call("mf_get_logs", run_id=run_id, component="trainer")
        components = ", ".join(s.component for s in logs.streams)
        return (f"The logs do not explain the stall: mf_summarize_logs read every component ({components}) since "
                "the run started and found no error.",
                f"{stop_it[0].upper()}{stop_it[1:]}; {tail} shows the trainer's last lines before it went quiet.",
                [stop, tail])
    cut = (logs.caps or [s.note for s in logs.streams if s.note] or ["a cap of the logs API"])[0]
    return (f"The logs read hold no error, but they do not cover the whole run ({cut.rstrip('.')}): they do not "
            "explain the stall so far.",
            f"{summary} shows where the reading stopped; {stop_it}.", [summary, stop])
