"""Launch exactly once: lost answers, retries from new processes, nothing-sent, racing processes.

Real HTTP against the emulator throughout. The emulator's ``commit_then_timeout`` fault
creates the run and then holds the answer past the client's (shortened) create timeout.
"""

from __future__ import annotations

import multiprocessing as mp
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest
from _helpers import EXAMPLE, cli_env, dispatch, emulator_env, mf_json, planned

from skill.emulator import EmulatorServer, closed_port
from skill.exit_codes import EXIT_AMBIGUOUS, exit_code_for
from tools.core import Context
from tools.errors import ToolError, ToolFailure
from tools.guardrails import confirmation as gate
from tools.launch import approve_plan
from tools.platform import wire
from tools.platform.client import PlatformClient, RetryPolicy
from tools.platform.settings import resolve_settings


def make_ctx(emulator: EmulatorServer, tmp_path: Path, *, base_url: str | None = None,
             transport: httpx.BaseTransport | None = None, create_timeout: float = 120.0,
             reads_once: bool = False, **kw: Any) -> Context:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (tmp_path / "project").mkdir(exist_ok=True)
    env = emulator_env(emulator, base_url)
    settings = resolve_settings(env=env, home=home)
    client = PlatformClient(settings, create_timeout=create_timeout, transport=transport,
                            retry=RetryPolicy(max_attempts=1) if reads_once else None)
    return Context(env=env, home=home, state_dir=tmp_path / "state", cwd=tmp_path / "project",
                   _settings=settings, _platform=client, **kw)


def approved_plan(ctx: Context, tmp_path: Path) -> tuple[Any, str]:
    """The example planned in the project folder, and the code a person got for it at the terminal."""
    cfg = tmp_path / "project" / "rl.toml"
    shutil.copy(EXAMPLE, cfg)
    p = planned(ctx, cfg, team="personal")
    return p, approve_plan(p.plan_id, "terminal", ctx)


def cli_dispatch(emulator: EmulatorServer, tmp_path: Path, plan_id: str, *extra: str) -> tuple[int, dict[str, Any]]:
    """``model-factory dispatch-run PLAN_ID --json`` in a new process over the same state folder."""
    env = cli_env(emulator, tmp_path / "home", tmp_path / "state")
    return mf_json("dispatch-run", plan_id, *extra, env=env, cwd=tmp_path / "project")


def outcomes(ctx: Context, plan_id: str) -> list[str | None]:
    return [a.outcome for a in gate.launch_state(ctx.store(), plan_id).attempts]


def test_lost_answer_is_reconciled_and_no_retry_creates_a_second_run(emulator, tmp_path):
    ctx = make_ctx(emulator, tmp_path, create_timeout=0.5)
    p, token = approved_plan(ctx, tmp_path)
    emulator.faults.commit_then_timeout(mode="delay", delay=3.0)
    first = dispatch(ctx, p.plan_id, token)
    assert not isinstance(first, ToolError), first
    created = list(emulator.state.runs.values())
    assert len(created) == 1 and first.status == "reconciled" and first.run_id == created[0].id
    assert created[0].name == p.run_name and outcomes(ctx, p.plan_id) == ["reconciled"]

    # Every kind of retry an agent might make: same token, no token, a fresh approval, new processes.
    asked: list[Any] = []
    again = dispatch(make_ctx(emulator, tmp_path, approver=lambda r: asked.append(r) or True), p.plan_id)
    assert (again.status, again.run_id) == ("already_dispatched", first.run_id) and asked == []
    assert dispatch(ctx, p.plan_id, token).run_id == first.run_id
    fresh = gate.mint(ctx.store(), p.plan_id, p.plan_hash, "terminal")
    assert dispatch(ctx, p.plan_id, fresh).status == "already_dispatched"
    with pytest.raises(ToolFailure) as refused:
        approve_plan(p.plan_id, "terminal", ctx)
    assert refused.value.error.code == "already_dispatched"
    for extra in ((), ("--confirmation", token)):
        code, out = cli_dispatch(emulator, tmp_path, p.plan_id, *extra)
        assert (code, out["status"], out["run_id"]) == (0, "already_dispatched", first.run_id)
    assert len(emulator.state.runs) == 1 and emulator.state.create_attempts == 1


def test_unanswered_create_is_never_resent_and_is_found_when_it_appears(emulator, tmp_path):
    ctx = make_ctx(emulator, tmp_path)
    p, token = approved_plan(ctx, tmp_path)
    emulator.faults.status(504, "POST", "/training/runs")  # sent, no usable answer; nothing created
    first = dispatch(ctx, p.plan_id, token)
    assert first.code == "ambiguous_launch" and first.ambiguous and exit_code_for(first) == EXIT_AMBIGUOUS
    assert "Never re-dispatch" in first.fix and p.run_name.rsplit("-", 1)[1] in first.fix
    code, out = cli_dispatch(emulator, tmp_path, p.plan_id, "--confirmation", token)
    assert code == EXIT_AMBIGUOUS and out["code"] == "ambiguous_launch"
    assert dispatch(ctx, p.plan_id).code == "ambiguous_launch"
    sent = [f for f in emulator.faults.fired if f[2:] == ("POST", "/api/v1/training/runs")]
    assert len(sent) == 1 and emulator.state.create_attempts == 0 and emulator.state.runs == {}
    with pytest.raises(ToolFailure) as refused:
        approve_plan(p.plan_id, "terminal", ctx)
    assert refused.value.error.code == "ambiguous_launch"

    # The platform turns out to have created it after all (late): reconciliation finds it by fingerprint.
    late_config = {"model": {"name": "PrimeIntellect/Qwen3-0.6B-Reverse-Text-SFT"}, "inference": {}}
    late = ctx.platform().create_run(wire.build_create_body(late_config, name=p.run_name))
    found = dispatch(ctx, p.plan_id)
    assert (found.status, found.run_id) == ("reconciled", late.run_id)
    assert outcomes(ctx, p.plan_id) == ["reconciled"]
    assert dispatch(ctx, p.plan_id, token).status == "already_dispatched" and len(emulator.state.runs) == 1


def test_a_lost_create_is_reconciled_to_the_plans_own_run_beside_other_runs_of_the_same_owner(emulator, tmp_path):
    """Reconciliation picks the run carrying this plan's fingerprint, never just a run of the owner: here the owner
    has a run of another plan of the same config (same name, another fingerprint) made before, and one made after,
    newest first in the listing."""
    ctx = make_ctx(emulator, tmp_path)
    config = {"model": {"name": "PrimeIntellect/Qwen3-0.6B-Reverse-Text-SFT"}, "inference": {}}
    other_plan, _ = approved_plan(ctx, tmp_path)  # another plan of the config: its run name has another fingerprint
    before = ctx.platform().create_run(wire.build_create_body(config, name=other_plan.run_name)).run_id
    (tmp_path / "project" / "rl.toml").write_text(EXAMPLE.read_text() + "\n# changed\n")
    p = planned(ctx, tmp_path / "project" / "rl.toml", team="personal")
    token = approve_plan(p.plan_id, "terminal", ctx)
    assert p.run_name != other_plan.run_name and p.run_name.rsplit("-", 1)[0] == other_plan.run_name.rsplit("-", 1)[0]
    emulator.faults.status(504, "POST", "/training/runs")  # sent, no usable answer
    assert dispatch(ctx, p.plan_id, token).code == "ambiguous_launch"
    emulator.faults.clear()
    emulator.state.advance(5)
    ours = ctx.platform().create_run(wire.build_create_body(config, name=p.run_name)).run_id  # it landed after all
    emulator.state.advance(5)
    after = ctx.platform().create_run(wire.build_create_body(config, name=other_plan.run_name)).run_id
    assert ctx.platform().list_runs(team_id=None).runs[0].id == after  # the newest run of the owner is not ours
    found = dispatch(ctx, p.plan_id)
    assert (found.status, found.run_id) == ("reconciled", ours), found
    assert {before, after}.isdisjoint({found.run_id}) and outcomes(ctx, p.plan_id) == ["reconciled"]


class CreateGoesToDeadPort(httpx.HTTPTransport):
    """Real HTTP, except that the first create is sent to a port nobody listens on (connection refused)."""

    def __init__(self, port: int) -> None:
        super().__init__()
        self.port, self.armed = port, True

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self.armed and request.method == "POST" and request.url.path.endswith("/training/runs"):
            self.armed = False
            request.url = request.url.copy_with(port=self.port)
        return super().handle_request(request)


def test_nothing_sent_then_retry_creates_one_run_without_new_approval(emulator, tmp_path):
    ctx = make_ctx(emulator, tmp_path)
    p, token = approved_plan(ctx, tmp_path)
    with closed_port() as dead:
        down = make_ctx(emulator, tmp_path, base_url=dead.url, reads_once=True)
        unreachable = dispatch(down, p.plan_id, token)
        assert unreachable.code == "unavailable" and unreachable.retryable and not unreachable.ambiguous
        assert outcomes(ctx, p.plan_id) == []  # the platform was down before anything was claimed

        flaky = make_ctx(emulator, tmp_path, transport=CreateGoesToDeadPort(dead.port))
        not_sent = dispatch(flaky, p.plan_id, token)
    assert not_sent.code == "unavailable" and not_sent.retryable and "Nothing was sent" in not_sent.message
    assert "same confirmation" in not_sent.fix and outcomes(ctx, p.plan_id) == ["not_sent"]
    assert emulator.state.runs == {}
    retried = dispatch(flaky, p.plan_id, token)
    assert retried.status == "created" and outcomes(ctx, p.plan_id) == ["not_sent", "created"]
    assert list(emulator.state.runs) == [retried.run_id] and emulator.state.create_attempts == 1


def _race_worker(env: dict[str, str], home: str, state: str, plan_id: str, token: str | None,
                 barrier: Any, out: Any) -> None:
    from tools.core import Context as Ctx
    from tools.launch import DispatchRunInput as Input
    from tools.launch import dispatch_run as run

    ctx = Ctx(env=env, home=Path(home), state_dir=Path(state), cwd=Path(state).parent / "project")
    barrier.wait(timeout=60)
    out.put(run(Input(plan_id=plan_id, confirmation=token), ctx).model_dump(mode="json"))


@pytest.mark.parametrize("channel", ["token", "policy"])
def test_two_processes_dispatching_the_same_plan_create_one_run(emulator, tmp_path, channel):
    ctx = make_ctx(emulator, tmp_path)
    p, token = approved_plan(ctx, tmp_path)
    if channel == "policy":
        policy = tmp_path / "home" / ".config" / "model-factory" / "policy.toml"
        policy.parent.mkdir(parents=True)
        policy.write_text("max_usd_per_run = 100.0\n")
        policy.chmod(0o600)
    spawn = mp.get_context("spawn")
    barrier, out = spawn.Barrier(2), spawn.Queue()
    args = (emulator_env(emulator), str(tmp_path / "home"), str(tmp_path / "state"), p.plan_id,
            token if channel == "token" else None, barrier, out)
    workers = [spawn.Process(target=_race_worker, args=args) for _ in range(2)]
    for w in workers:
        w.start()
    results = [out.get(timeout=90) for _ in workers]
    for w in workers:
        w.join(timeout=30)
    assert len(emulator.state.runs) == 1 and emulator.state.create_attempts == 1
    (run_id,) = emulator.state.runs
    winners = [r for r in results if r.get("status") == "created"]
    losers = [r for r in results if r.get("status") != "created"]
    assert len(winners) == 1 and winners[0]["run_id"] == run_id
    loser = losers[0]
    assert loser.get("code") == "ambiguous_launch" or \
        (loser["status"], loser["run_id"]) == ("already_dispatched", run_id)
    assert dispatch(ctx, p.plan_id).run_id == run_id
    assert [a.outcome for a in gate.launch_state(ctx.store(), p.plan_id).attempts] == ["created"]
