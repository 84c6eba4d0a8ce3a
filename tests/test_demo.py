"""``model-factory demo --scenario NAME``: the workflow into a healthy run or a run in trouble, and
the tools' diagnosis, as the real CLI prints it (a subprocess; the emulator in that process, or a
running one named by PRIME_API_BASE_URL)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from _helpers import CLI, emulator_banner, free_port, in_terminal, mf, pasted

from skill.demo import SCENARIOS, run_demo
from skill.emulator import DEFAULT_API_KEY
from tools.guardrails.store import Store


def demo(*args: str, env: dict[str, str], cwd: Path, timeout: float = 400) -> subprocess.CompletedProcess:
    """``model-factory demo ARGS`` in a process of its own, each second it waits moving the emulator's clock
    1,000 s (``--speed 1000``: it reaches its verdict within seconds, as at any speed)."""
    return mf("demo", "--speed", "1000", *args, env=env, cwd=cwd, timeout=timeout)


def plain_env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "home").mkdir(exist_ok=True)
    return {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home")}


def evidence_of(out: dict) -> str:
    return " ".join(out["evidence"])


#: What each scenario's diagnosis must show: (verdicts, a phrase of the evidence).
EXPECTED = {
    "healthy": ({"completed"}, "Latest step 20/20"),
    "stalled": ({"stalled"}, "No new step for"),
    "crash-loop": ({"crash_looping"}, "CrashLoopBackOff"),
    "failed": ({"failed"}, "Failure analysis"),
    "queued": ({"queued"}, "run(s) ahead"),
    "missing-traces": ({"completed"}, "with no traces"),
    "image-pull-slow": ({"progressing"}, "Latest step"),
    "image-pull-backoff": ({"image_pull_failing", "failed"}, "ImagePull"),
}


#: What each learning scenario's diagnosis must show: (the learning verdict, a finding's signal, a phrase of its
#: text). They run to the end at a fast clock, in this process.
LEARNING = {
    "learning": ("learning", "reward_trend", "(95%), rising"),
    "flat": ("flat", "reward_trend", "(95%), flat"),
    "saturated": ("saturated", "reward_saturated", "nothing to learn from"),
    "entropy-collapse": (None, "entropy_collapse", "of its start"),
    "kl-spike": (None, "mismatch_kl_spike", "at step 12"),
    "trainer-bound": (None, "orchestrator_waits", "the trainer is the bottleneck"),
    "orchestrator-bound": (None, "trainer_waits", "the orchestrator is the bottleneck"),
    "sft": ("learning", "no_reward", "no reward, and no rollouts"),
}


def test_every_scenario_has_an_expectation():
    assert set(EXPECTED) | set(LEARNING) == set(SCENARIOS) and not set(EXPECTED) & set(LEARNING)


@pytest.mark.parametrize("scenario", list(LEARNING))
def test_demo_learning_scenario_json_gives_the_learning_verdict_and_its_finding(scenario, tmp_path, monkeypatch,
                                                                                capsys):
    """In this process, on the demo's embedded emulator whose clock moves with the demo's waits (no wall time)."""
    for name in ("PRIME_API_BASE_URL", "PRIME_BASE_URL", "MODEL_FACTORY_STATE_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    code = run_demo(as_json=True, scenario=scenario, pace=False)
    printed = capsys.readouterr()
    assert code == 0 and "Traceback" not in printed.err, printed.err
    out = json.loads(printed.out)
    verdict, signal, phrase = LEARNING[scenario]
    assert (out["scenario"], out["verdict"], out["reached"], out["status"]) == (scenario, "completed", True,
                                                                                "COMPLETED")
    learning = out["learning"]
    assert verdict is None or learning["verdict"] == verdict
    found = [f for f in learning["findings"] if f["signal"] == signal]
    assert found and phrase in found[0]["text"], learning
    tools = [c["tool"] for c in out["next_calls"]]
    if scenario == "sft":  # a loss, no reward, and no traces to offer
        assert learning["metric"] == "loss" and out["final_reward"] is None and "mf_download_traces" not in tools
    else:
        assert learning["metric"] == "reward/all/mean" and out["final_reward"] is not None
    assert "dest" not in out and not any(tmp_path.iterdir())  # nothing downloaded, nothing left behind


@pytest.mark.parametrize("scenario", list(EXPECTED))
def test_demo_scenario_json_gives_the_verdict_and_its_evidence(scenario, tmp_path, monkeypatch, capsys):
    """In this process (the CLI's own function), on the demo's embedded emulator, whose clock moves with the
    demo's waits: the same verdicts however busy the machine is, and no wall time spent waiting."""
    for name in ("PRIME_API_BASE_URL", "PRIME_BASE_URL", "MODEL_FACTORY_STATE_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    code = run_demo(as_json=True, dest=tmp_path / "traces", scenario=scenario, pace=False)
    printed = capsys.readouterr()
    assert "Traceback" not in printed.err, printed.err
    assert code == 0, printed.err
    out = json.loads(printed.out)
    verdicts, phrase = EXPECTED[scenario]
    assert out["scenario"] == scenario and out["verdict"] in verdicts and out["reached"] is True
    assert phrase in evidence_of(out), out["evidence"]
    assert out["timeline"][-1]["verdict"] == out["verdict"] and out["embedded_emulator"] is True
    assert all(str(call_text) for call_text in out["next_calls"])
    if scenario == "crash-loop":
        logs = out["next_calls"][0]
        assert logs["tool"] == "mf_get_logs" and logs["arguments"]["component"] == "env-server"
    if scenario == "failed":
        assert out["failure_analysis"]["root_cause"] and out["status"] == "FAILED"
    if scenario == "stalled":  # the logs were read, whole, and hold nothing that explains it
        logs = out["logs"]
        assert logs["finding"].startswith("The logs do not explain the stall") and logs["distinct_errors"] == 0
        assert logs["covers_whole_run"] is True and logs["next_calls"][0] == {
            "tool": "mf_stop_run", "arguments": {"run_id": out["run_id"]}}
    else:
        assert "logs" not in out
    if scenario == "image-pull-slow":
        assert "starting" in [p["verdict"] for p in out["timeline"]]
    if scenario == "healthy":
        assert out["learning"]["verdict"] == "learning" and "(95%), rising" in out["learning"]["findings"][0]["text"]
        assert out["traces_complete"] is True and out["traces_downloaded"] == 320 and out["final_reward"] > 0
    if scenario == "missing-traces":
        assert out["traces_complete"] is False and out["missing"]["steps_without_traces"] == [2]
    if SCENARIOS[scenario].download:
        assert out["dest"] == str(tmp_path / "traces")
    else:
        assert "dest" not in out and not (tmp_path / "traces").exists()


@pytest.fixture
def served(tmp_path):
    """``model-factory emulator --scenario stalled`` in its own process, its clock stopped (the demo's waits move
    it), and the exports it prints."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "skill", "emulator", "--port", str(port), "--speed", "0",
                             "--scenario", "stalled"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    lines, exports = emulator_banner(proc)
    assert lines[0].startswith(f"Model Factory emulator on {base}") and "stall" in " ".join(lines), lines
    env = {**plain_env(tmp_path), **exports}
    assert env["PRIME_API_BASE_URL"] == env["PRIME_FRONTEND_URL"] == base and env["PRIME_API_KEY"] == DEFAULT_API_KEY
    yield base, env
    proc.terminate()
    proc.wait(timeout=10)


def test_emulator_scenario_applies_to_every_next_run_and_the_demo_uses_that_emulator(served, tmp_path):
    base, env = served
    healthy = demo("--scenario", "healthy", "--json", env=env, cwd=tmp_path)
    out = json.loads(healthy.stdout)
    # the emulator's scenario made the healthy demo's run stall: the demo stops there and says so (exit 1)
    assert healthy.returncode == 1 and (out["verdict"], out["reached"]) == ("stalled", False)
    assert out["embedded_emulator"] is False and out["emulator"] == base
    stalled = demo("--scenario", "stalled", "--json", env=env, cwd=tmp_path)
    assert stalled.returncode == 0 and json.loads(stalled.stdout)["verdict"] == "stalled"
    # the runs stay on that emulator, for the commands the demo printed
    runs = httpx.get(f"{base}/api/v1/rft/runs", headers={"Authorization": f"Bearer {DEFAULT_API_KEY}"}).json()
    assert {out["run_id"], json.loads(stalled.stdout)["run_id"]} <= {r["id"] for r in runs["runs"]}


def test_the_demo_never_uses_a_remote_api_url_and_says_why(tmp_path):
    from skill.demo import running_emulator

    for url in ("https://api.primeintellect.ai", "http://10.0.0.1:8765"):
        used, why = running_emulator({"PRIME_API_BASE_URL": url})
        host = url.split("//")[1]
        assert used is None and why.startswith(f"it names {host}, not this machine's loopback"), why
        assert "never on a remote host or the platform" in why
    assert running_emulator({}) == (None, None)
    # a loopback URL where no emulator answers, a port that is no port: not used either, and said so
    port = free_port()
    assert running_emulator({"PRIME_API_BASE_URL": f"http://127.0.0.1:{port}"}) == (
        None, f"no emulator answers at 127.0.0.1:{port} (is `model-factory emulator` still running there?).")
    assert running_emulator({"PRIME_API_BASE_URL": "http://127.0.0.1:99999"})[1] == "it holds no valid port."


def test_a_demo_pointed_at_a_path_of_a_running_emulator_names_the_path_and_the_root_url_to_use(emulator):
    from skill.demo import running_emulator

    base = emulator.base_url
    where = base.split("//")[1]
    for path in ("/api", "/api/v2/", "/dashboard/training"):
        used, why = running_emulator({"PRIME_API_BASE_URL": base + path})
        assert used is None and why == (
            f"it has the path {path.rstrip('/')} after {where}: the variable is the emulator's root URL, {base} "
            "(as in the export line `model-factory emulator` prints), with no path."), why
    # the root, or the root with /api/v1 (which every command drops too): that emulator is used
    for url in (base, base + "/", base + "/api/v1"):
        assert running_emulator({"PRIME_API_BASE_URL": url}) == (base, None)


def test_a_demo_pointed_at_an_emulators_wildcard_address_says_it_runs_its_own_and_which_url_reaches_that_one(
        tmp_path):
    port = free_port()
    env = {**plain_env(tmp_path), "PRIME_API_BASE_URL": f"http://0.0.0.0:{port}"}  # as the emulator printed it once
    proc = demo("--scenario", "queued", "--json", env=env, cwd=tmp_path)
    said = " ".join(proc.stderr.split())
    assert proc.returncode == 0 and said.startswith(
        f"PRIME_API_BASE_URL is not used: it names 0.0.0.0:{port}, an address an emulator listens on"), said
    assert f"this machine reaches it at http://127.0.0.1:{port}" in said
    assert "Emulator at http://127.0.0.1:" in said and "(in this process; it stops with the demo)" in said
    out = json.loads(proc.stdout)
    assert out["embedded_emulator"] is True and out["base_url_ignored"].startswith(f"it names 0.0.0.0:{port}")


def test_a_stalled_run_whose_logs_say_nothing_is_diagnosed_so_and_the_printed_stop_command_works(served, tmp_path):
    base, env = served
    proc = demo("--scenario", "stalled", env=env, cwd=tmp_path)
    said = " ".join(proc.stderr.split())
    assert proc.returncode == 0 and "The logs do not explain the stall" in said, proc.stderr
    assert "found no error" in said and "env-server/reverse-text" in said, proc.stderr
    stop = re.search(r"Next: Stop the run so it stops costing money: `([^`]+ stop-run (\w+))`", said)
    assert stop, proc.stderr
    stopped = pasted(stop[1], env, tmp_path)
    # the stop is planned for that run and waits for a person's approval (exit 4), as every stop does
    assert stopped.returncode == 4 and f"stop run {stop[2]}" in stopped.stderr, stopped.stderr


@pytest.fixture
def persons_emulator(tmp_path):
    """``model-factory emulator`` at real-time speed in its own process (a person's): a demo's run stays
    alive on it; returns (base URL, env with its exports)."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "skill", "emulator", "--port", str(port), "--speed", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    yield f"http://127.0.0.1:{port}", {**plain_env(tmp_path), **emulator_banner(proc)[1]}
    proc.terminate()
    proc.wait(timeout=10)


def run_status(base: str, run_id: str) -> str:
    answer = httpx.get(f"{base}/api/v1/rft/runs/{run_id}", headers={"Authorization": f"Bearer {DEFAULT_API_KEY}"})
    return answer.json()["run"]["status"]


def interrupted_demo(env: dict[str, str], cwd: Path, signum: int, at: str, *args: str,
                     before: Callable[[], object] = lambda: None) -> subprocess.CompletedProcess:
    """The demo on ``env``'s emulator, sent ``signum`` once its progress shows a line starting with ``at`` (as
    a person presses Ctrl-C while it works), ``before()`` called just before that; returns the finished process."""
    proc = subprocess.Popen([sys.executable, "-m", "skill", "demo", "--speed", "1", *args], env=env, cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as in a terminal
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if line.startswith(at):
            break
    assert seen and seen[-1].startswith(at), "".join(seen)
    before()
    proc.send_signal(signum)
    err = proc.stderr.read()  # through the reader the lines so far came from: it may hold more already
    out = proc.stdout.read()
    return subprocess.CompletedProcess(proc.args, proc.wait(timeout=120), out, "".join(seen) + err)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_demo_stops_the_run_it_launched_on_a_persons_emulator(persons_emulator, tmp_path, signum):
    base, env = persons_emulator
    done = interrupted_demo(env, tmp_path, signum, "5. Dispatch")
    run_id = re.search(r"5\. Dispatch: run (\w+) created", done.stderr)[1]
    # the exit code says which signal: 130 for Ctrl-C (SIGINT), 143 (128 + 15) for SIGTERM
    assert done.returncode == 128 + signum and "Traceback" not in done.stderr, done.stderr
    assert f"Run {run_id} stopped." in done.stderr and run_status(base, run_id) == "STOPPED", done.stderr


def test_an_interrupt_while_the_demo_launches_waits_for_the_answer_then_stops_that_run(persons_emulator, tmp_path):
    base, env = persons_emulator
    rule = {"kind": "delay", "method": "POST", "path": "training/runs", "delay": 3}  # the answer comes late
    httpx.post(f"{base}/_emulator/faults", json=rule).raise_for_status()
    done = interrupted_demo(env, tmp_path, signal.SIGINT, "4. Approve")  # approved: the create is being sent
    assert done.returncode == 130 and "Traceback" not in done.stderr, done.stderr
    runs = httpx.get(f"{base}/api/v1/rft/runs", headers={"Authorization": f"Bearer {DEFAULT_API_KEY}"}).json()["runs"]
    assert [r["status"] for r in runs] == ["STOPPED"] and f"Run {runs[0]['id']} stopped." in done.stderr, done.stderr


@pytest.mark.parametrize("status", [403, 500])  # refused, or its answer lost (the stop may not have been taken)
def test_an_interrupted_demo_that_cannot_stop_its_run_prints_the_command_that_does(persons_emulator, tmp_path,
                                                                                   status):
    base, env = persons_emulator
    rule = {"kind": "status", "method": "PUT", "path": "rft/runs/*/stop", "status": status, "times": None}
    httpx.post(f"{base}/_emulator/faults", json=rule).raise_for_status()
    done = interrupted_demo(env, tmp_path, signal.SIGINT, "5. Dispatch", "--json")
    run_id = re.search(r"5\. Dispatch: run (\w+) created", done.stderr)[1]
    said = " ".join(done.stderr.split())
    assert done.returncode == 130 and "may still be running" in said, done.stderr
    assert run_status(base, run_id) in ("QUEUED", "RUNNING")
    out = json.loads(done.stdout)
    assert (out["status"], out["run_id"], out["run_stopped"]) == ("INTERRUPTED", run_id, False)
    assert out["next_calls"] == [{"tool": "mf_stop_run", "arguments": {"run_id": run_id}}]
    command = re.search(r"Stop it with `([^`]+)`", said)[1]
    httpx.delete(f"{base}/_emulator/faults").raise_for_status()
    stopped = pasted(command, env, tmp_path)
    assert stopped.returncode == 4 and f"stop run {run_id}" in stopped.stderr, stopped.stderr  # a person approves it


def test_an_interrupted_demo_whose_emulator_froze_says_it_stops_the_run_then_prints_the_stop_command_soon(
        persons_emulator, tmp_path):
    from skill.demo import STOP_SECONDS

    base, env = persons_emulator
    frozen = {"kind": "delay", "delay": 120, "times": None}  # every API request held: the emulator froze

    done = interrupted_demo(env, tmp_path, signal.SIGINT, "5. Dispatch",
                            before=lambda: httpx.post(f"{base}/_emulator/faults", json=frozen).raise_for_status())
    run_id = re.search(r"5\. Dispatch: run (\w+) created", done.stderr)[1]
    said = " ".join(done.stderr.split())
    assert done.returncode == 130 and "Traceback" not in done.stderr, done.stderr
    # said at once, before the stop's first request; then the stop gives up within its bound, not the 30 s reads'
    stopping = said.index(f"Interrupted: stopping run {run_id}, which the demo launched on your emulator")
    assert f"at most {STOP_SECONDS} s" in said and said.index("may still be running") > stopping, said
    assert f"within {STOP_SECONDS} s" in said, said
    command = re.search(r"Stop it with `([^`]+)`", said)[1]
    httpx.delete(f"{base}/_emulator/faults").raise_for_status()  # the emulator answers again: the command works
    stopped = pasted(command, env, tmp_path)
    assert stopped.returncode == 4 and f"stop run {run_id}" in stopped.stderr, stopped.stderr


@pytest.mark.parametrize("ending", ["end", signal.SIGINT, signal.SIGTERM], ids=["end", "SIGINT", "SIGTERM"])
def test_the_demo_on_its_embedded_emulator_removes_its_temporary_folders_however_it_ends(tmp_path, ending):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**plain_env(tmp_path), "TMPDIR": str(scratch)}
    if ending == "end":
        done = demo("--scenario", "queued", env=env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    else:  # interrupted while it monitors its run
        done = interrupted_demo(env, tmp_path, ending, "5. Dispatch")
        assert done.returncode == 128 + ending and "Traceback" not in done.stderr, done.stderr
    assert "in this process; it stops with the demo" in done.stderr, done.stderr
    assert list(scratch.iterdir()) == [] and not (tmp_path / ".model-factory").exists()


def test_a_demo_on_a_persons_emulator_keeps_its_plan_in_the_state_folder_for_the_commands_it_prints(served,
                                                                                                    tmp_path):
    base, env = served
    scratch, project = tmp_path / "tmp", tmp_path / "project"
    scratch.mkdir()
    project.mkdir()
    env = {**env, "TMPDIR": str(scratch)}
    # no MODEL_FACTORY_STATE_DIR: the person's own store, where run-report in any folder reads the plan
    shown = demo("--scenario", "stalled", env=env, cwd=project)
    said = " ".join(shown.stderr.split())
    store = Path(env["HOME"]) / ".local" / "state" / "model-factory"
    assert shown.returncode == 0 and f"its plan in the state folder {store}" in said, said
    assert "the commands above work in this shell, from any folder" in said, said  # the exports are set
    report = re.search(r"and `([^`]+ run-report \w+)` compares its cost with the plan", said)
    assert report, said
    reported = pasted(report[1], env, project)
    assert reported.returncode == 0 and "against the plan's estimate of $" in " ".join(reported.stdout.split())
    # MODEL_FACTORY_STATE_DIR named: that folder, as every other command uses it
    state = tmp_path / "state"
    named = demo("--scenario", "stalled", "--json", env={**env, "MODEL_FACTORY_STATE_DIR": str(state)}, cwd=project)
    out = json.loads(named.stdout)
    assert out["state_dir"] == str(state) and Store(state).run_links(out["run_id"])
    assert list(scratch.iterdir()) == []  # its temporary HOME is gone


def test_a_demo_on_a_persons_emulator_from_a_shell_without_its_key_says_which_exports_its_commands_need(served,
                                                                                                        tmp_path):
    base, served_env = served
    env = {**plain_env(tmp_path), "PRIME_API_BASE_URL": base}  # only the URL: no key, traces host, dashboard
    shown = demo("--scenario", "stalled", env=env, cwd=tmp_path)
    said = " ".join(shown.stderr.split())
    assert shown.returncode == 0 and "work in this shell" not in said, said
    assert ("the commands above need PRIME_API_KEY, PRIME_TRACES_URL, PRIME_FRONTEND_URL set for that emulator, which "
            "this shell lacks") in said, said
    export = re.search(r"paste `(export [^`]+)` here first; then they work from any folder", said)[1]
    exported = dict(w.split("=", 1) for w in export.split()[1:])
    assert exported == {k: v for k, v in served_env.items() if k not in env or k == "PRIME_API_BASE_URL"}  # as printed

    report = re.search(r"and `([^`]+ run-report \w+)` compares its cost with the plan", said)[1]
    reported = pasted(f"{export}; {report}", env, tmp_path)  # pasted into that shell, in that order
    assert reported.returncode == 0 and "against the plan's estimate of $" in " ".join(reported.stdout.split())


def test_history_after_the_demo_shows_every_call_in_order_and_no_secret(tmp_path):
    env = plain_env(tmp_path)
    done = demo("--scenario", "queued", "--json", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout)["run_id"]
    shown = mf("history", "--json", env=env, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    calls = json.loads(shown.stdout)["calls"]
    tools = [c["tool"] for c in calls]
    assert tools[:4] == ["mf_preflight", "mf_validate_config", "mf_plan_run", "mf_dispatch_run"], tools
    assert set(tools[4:]) <= {"mf_wait_for_run", "mf_check_progress", "mf_summarize_logs", "mf_get_metrics"}, tools
    assert [c["at"] for c in calls] == sorted(c["at"] for c in calls)  # in the order they were made
    assert {c["surface"] for c in calls} == {"demo"} and {c["outcome"] for c in calls} == {"ok"}
    launched = calls[3]
    assert launched["run_id"] == run_id and launched["usd_approved"] is not None and launched["plan_id"]
    store = Path(env["HOME"]) / ".local" / "state" / "model-factory"
    stored = b"".join(p.read_bytes() for p in store.glob("state.db*"))
    assert DEFAULT_API_KEY not in shown.stdout and DEFAULT_API_KEY.encode() not in stored
    code, screen = in_terminal([CLI, "history", "--run", run_id], {**env, "NO_COLOR": "1"}, tmp_path, columns=80)
    said = " ".join(screen.split())
    assert code == 0 and "dispatch-run" in said and "ok, approved" in said and "mf_" not in said, screen
    assert all(len(line) <= 80 for line in screen.splitlines() if str(store) not in line), screen
