"""A run's life on the emulator beyond the happy path, over real HTTP: PENDING, pods Pending
and ContainerCreating, slow and failing image pulls, a stop with a teardown, scenarios for
every run (admin route, constructor), timing changes, usage against running time, and the
run's dashboard page. The clock is frozen and moved by hand (simulated seconds).
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys

import httpx
import pytest
import test_emulator
from _helpers import T, at_step, free_port
from test_emulator import _client, create, done_after, get_run, logs

from skill.emulator import TEAM_RESEARCH_ID, EmulatorServer, create_app, serve

emu, api, admin = test_emulator.emu, test_emulator.api, test_emulator.admin
PODS = T.pod_schedule_seconds  # of the start-up, the time pods are Pending


def env_status(api: httpx.Client, run_id: str) -> list[str]:
    return [s["status"] for s in api.get(f"/rft/runs/{run_id}/env-servers").json()["env_servers"]]


# -- start-up -------------------------------------------------------------------------------------

def test_a_pending_run_is_pending_then_queued_then_running(api: httpx.Client, emu: EmulatorServer,
                                                           rl_config: dict) -> None:
    emu.state.set_scenario("pending", seconds=120)
    run_id = create(api, rl_config)
    run = get_run(api, run_id)
    assert (run["status"], run["runsAhead"], run["queueReason"], run["startedAt"]) == ("PENDING", None, None, None)
    not_yet = api.get(f"/rft/runs/{run_id}/logs")
    assert not_yet.status_code == 404 and not_yet.json() == {"detail": "Run is pending; logs are not available yet"}
    assert env_status(api, run_id) == []
    emu.state.advance(119)
    assert get_run(api, run_id)["status"] == "PENDING"
    emu.state.advance(2)
    run = get_run(api, run_id)
    assert (run["status"], run["runsAhead"]) == ("QUEUED", 3) and "H200_141GB" in run["queueReason"]
    emu.state.advance(T.queue_seconds)
    assert get_run(api, run_id)["status"] == "RUNNING"


def test_pods_are_pending_then_container_creating_then_running(api: httpx.Client, emu: EmulatorServer,
                                                               rl_config: dict) -> None:
    run_id = create(api, rl_config)
    emu.state.advance(T.queue_seconds + PODS - 1)
    assert env_status(api, run_id) == ["Pending"]
    emu.state.advance(2)
    assert env_status(api, run_id) == ["ContainerCreating"]
    assert get_run(api, run_id)["status"] == "RUNNING"
    emu.state.advance(T.startup_seconds - PODS)
    assert env_status(api, run_id) == ["Running"]


def test_a_slow_image_pull_keeps_pods_creating_then_the_run_goes_on(api: httpx.Client, emu: EmulatorServer,
                                                                   rl_config: dict) -> None:
    emu.state.set_scenario("image_pull_slow", seconds=600)
    run_id = create(api, rl_config, imageTag="v0.5.0")
    emu.state.advance(T.queue_seconds + T.startup_seconds + 590)
    assert env_status(api, run_id) == ["ContainerCreating"]
    assert api.get(f"/rft/runs/{run_id}/progress").json()["latestStep"] is None
    pulling = logs(api, run_id, component="env-server", env_name="reverse-text", search="Pulling image",
                   since_seconds=3600)
    assert pulling and pulling[0].startswith("[adminlog] ")
    assert 'Pulling image \\"ghcr.io/primeintellect-ai/prime-rl:v0.5.0\\"' in pulling[0]
    assert logs(api, run_id, component="trainer", search="Pulling image", since_seconds=3600)
    emu.state.advance(10 + 3 * T.step_seconds)
    assert env_status(api, run_id) == ["Running"]
    assert api.get(f"/rft/runs/{run_id}/progress").json()["latestStep"] == 3
    pulled = logs(api, run_id, component="trainer", search="Successfully pulled image", since_seconds=3600)
    assert len(pulled) == 1 and "in 645.0s" in pulled[0]  # from the pods' scheduling to the end of the pull
    emu.state.advance(done_after(20))
    assert get_run(api, run_id)["status"] == "COMPLETED"


def test_an_image_that_cannot_be_pulled_backs_off_then_fails_with_evidence(api: httpx.Client, emu: EmulatorServer,
                                                                          rl_config: dict) -> None:
    emu.state.set_scenario("image_pull_backoff", fail_after_seconds=900)
    run_id = create(api, rl_config, imageTag="v9.9.9-typo")
    pods = T.queue_seconds + PODS
    emu.state.advance(pods + 5.5)
    assert env_status(api, run_id) == ["ErrImagePull"]
    emu.state.advance(1)
    assert env_status(api, run_id) == ["ImagePullBackOff"]
    emu.state.advance(600)
    run = get_run(api, run_id)
    assert (run["status"], api.get(f"/rft/runs/{run_id}/progress").json()["latestStep"]) == ("RUNNING", None)
    assert env_status(api, run_id) in (["ImagePullBackOff"], ["ErrImagePull"])
    errors = logs(api, run_id, component="env-server", level="ERROR", since_seconds=3600)
    failed = [line for line in errors if "Failed to pull image" in line]
    assert len(failed) >= 5 and all("prime-rl:v9.9.9-typo" in line and "not found" in line for line in failed)
    assert any("Error: ImagePullBackOff" in line for line in errors)
    assert any("Back-off pulling image" in line for line in logs(api, run_id, component="trainer", level="WARNING",
                                                                  since_seconds=3600))
    assert logs(api, run_id, level="WARNING", search="image not pulled", since_seconds=3600)

    emu.state.advance(900)
    run = get_run(api, run_id)
    assert run["status"] == "FAILED" and "ImagePullBackOff" in run["errorMessage"]
    assert "v9.9.9-typo" in run["failureAnalysis"]["rootCause"]
    assert any("ImagePullBackOff" in e for e in run["failureAnalysis"]["evidence"])
    assert env_status(api, run_id) == ["Terminated"]


def test_an_image_pull_back_off_without_a_deadline_retries_every_five_minutes(
        api: httpx.Client, emu: EmulatorServer, rl_config: dict) -> None:
    emu.state.set_scenario("image_pull_backoff", fail_after_seconds=0)
    run_id = create(api, rl_config)
    emu.state.advance(T.queue_seconds + PODS + 3 * 3600)
    assert get_run(api, run_id)["status"] == "RUNNING"
    attempts = logs(api, run_id, component="trainer", search="Failed to pull image", since_seconds=3600)
    assert len(attempts) in (12, 13)  # the back-off has reached its 300 s cap


# -- stop -------------------------------------------------------------------------------------------

def test_a_slow_stop_tears_down_before_stopped(api: httpx.Client, emu: EmulatorServer, rl_config: dict) -> None:
    emu.state.set_scenario("slow_stop", seconds=60)
    run_id = create(api, rl_config)
    emu.state.advance(at_step(3) + 1)
    answered = api.put(f"/rft/runs/{run_id}/stop").json()["run"]
    assert (answered["status"], answered["completedAt"]) == ("RUNNING", None)
    assert "tearing down" in answered["notice"]
    assert env_status(api, run_id) == ["Terminating"]
    assert api.post(f"/training/runs/{run_id}/pause").status_code == 409
    assert api.put(f"/rft/runs/{run_id}/restart").status_code == 409
    assert api.put(f"/rft/runs/{run_id}/stop").json()["run"]["status"] == "RUNNING"  # a second stop changes nothing
    emu.state.advance(59)
    assert get_run(api, run_id)["status"] == "RUNNING"
    assert api.get(f"/rft/runs/{run_id}/progress").json()["latestStep"] == 3  # no step while tearing down
    emu.state.advance(2)
    run = get_run(api, run_id)
    assert (run["status"], run["notice"]) == ("STOPPED", None) and env_status(api, run_id) == ["Terminated"]
    stopped_at = emu.state.clock.from_iso(run["completedAt"])
    assert stopped_at == pytest.approx(emu.state.now() - 1, abs=0.01)

    queued = create(api, rl_config)  # no pods yet: nothing to tear down
    assert api.put(f"/rft/runs/{queued}/stop").json()["run"]["status"] == "STOPPED"


def test_timing_set_through_the_admin_route_applies_to_runs_created_later(
        admin: httpx.Client, api: httpx.Client, emu: EmulatorServer, rl_config: dict) -> None:
    before = create(api, rl_config)
    timing = admin.post("/timing", json={"pending_seconds": 30, "stop_seconds": 20}).json()
    assert (timing["pending_seconds"], timing["stop_seconds"], timing["queue_seconds"]) == (30, 20, T.queue_seconds)
    assert admin.get("/state").json()["timing"] == timing == admin.get("/timing").json()
    after = create(api, rl_config)
    assert (get_run(api, before)["status"], get_run(api, after)["status"]) == ("QUEUED", "PENDING")
    emu.state.advance(30 + T.queue_seconds + T.startup_seconds + 1)
    assert api.put(f"/rft/runs/{after}/stop").json()["run"]["status"] == "RUNNING"
    emu.state.advance(21)
    assert get_run(api, after)["status"] == "STOPPED"
    for bad in ({"stop_seconds": -1}, {"warp_seconds": 1}, {"stop_seconds": "soon"}):
        assert admin.post("/timing", json=bad).status_code == 400, bad


# -- scenarios for every run ---------------------------------------------------------------------------

def test_a_scenario_for_every_run_set_through_the_admin_route_until_forgotten(
        admin: httpx.Client, api: httpx.Client, emu: EmulatorServer, rl_config: dict) -> None:
    names = {s["name"]: s for s in admin.get("/scenarios").json()["scenarios"]}
    assert {"stall", "pending", "image_pull_slow", "image_pull_backoff", "slow_stop", "long_run",
            "many_traces"} <= set(names)
    assert names["many_traces"]["params"]["count"] == 2000 and names["image_pull_backoff"]["summary"]
    answer = admin.post("/scenario", json={"name": "stay_queued", "every_run": True, "params": {"runs_ahead": 4}})
    assert answer.json() == {"name": "stay_queued", "run_id": None, "every_run": True,
                             "params": {"runs_ahead": 4, "queue_reason": None}}
    assert admin.post("/scenario", json={"name": "stall", "every_run": True, "run_id": "cx"}).status_code == 400
    first, second = create(api, rl_config), create(api, rl_config)
    emu.state.advance(3600)
    assert [get_run(api, r)["runsAhead"] for r in (first, second)] == [4, 4]
    assert admin.get("/state").json()["every_run_scenarios"] == {"stay_queued": {"runs_ahead": 4,
                                                                                 "queue_reason": None}}
    assert admin.delete("/scenario").status_code == 200
    third = create(api, rl_config)
    emu.state.advance(T.queue_seconds + 1)
    assert get_run(api, third)["status"] == "RUNNING"


def test_the_constructor_applies_scenarios_to_every_run_even_after_a_reset(rl_config: dict) -> None:
    with EmulatorServer(speed=0, scenario={"stay_queued": {"runs_ahead": 6}, "slow_stop": None}) as server, \
            _client(server) as client:
        for _ in range(2):
            run_id = create(client, rl_config)
            server.state.advance(3600)
            assert get_run(client, run_id)["runsAhead"] == 6
            assert sorted(server.state.summary()["runs"][0]["scenarios"]) == ["slow_stop", "stay_queued"]
            server.state.reset()
    with pytest.raises(ValueError, match="meltdown"):
        EmulatorServer(speed=0, scenario="meltdown")


def test_serve_refuses_an_unknown_scenario_before_listening() -> None:
    with pytest.raises(ValueError, match="unknown scenario"):
        serve(port=0, scenario="meltdown")
    with pytest.raises(ValueError, match="count"):
        serve(port=0, scenario={"many_traces": {"count": 0}})


#: A process that imports the emulator once, then for each port read on stdin forks a child that serves on it
#: with :func:`serve` (its banner on this process's stderr), and kills it when the next line arrives.
FORKING_SERVER = """
import os, signal, sys
from skill.emulator import serve
import uvicorn.loops.asyncio, uvicorn.protocols.http.h11_impl, uvicorn.lifespan.off  # imported once, here
for line in sys.stdin:
    pid = os.fork()
    if pid == 0:
        serve(port=int(line), speed=0)
        os._exit(0)
    sys.stdin.readline()  # the test has connected: end this one
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    print("ended", flush=True)
"""


def test_the_emulator_accepts_a_connection_the_instant_its_banner_ends_every_time() -> None:
    """50 emulator processes, each forked from one that imported the emulator (so each starts in
    milliseconds): the moment the last banner line (``Admin: ...``) is read, a connection is made and an
    HTTP request answered. Nothing waits on time: the banner is printed after the socket listens, so the
    kernel queues the connection until the server accepts it."""
    proc = subprocess.Popen([sys.executable, "-c", FORKING_SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, bufsize=1)
    refused = []
    try:
        for attempt in range(50):
            port = free_port()
            proc.stdin.write(f"{port}\n")
            proc.stdin.flush()
            for line in proc.stderr:  # the child's banner (a dead child: the loop ends, then the assert)
                if line.startswith("Admin:"):
                    break
            else:
                pytest.fail(f"no banner from the emulator process (attempt {attempt})")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
                    sock.sendall(b"GET /_emulator/state HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    assert sock.recv(12).startswith(b"HTTP/1.1 200"), attempt
            except ConnectionRefusedError:
                refused.append(attempt)
            proc.stdin.write("next\n")
            proc.stdin.flush()
            assert proc.stdout.readline() == "ended\n"
    finally:
        proc.kill()
        proc.wait(30)
    assert refused == [], f"connections refused right after the banner: attempts {refused}"


# -- usage -----------------------------------------------------------------------------------------

def test_usage_accrues_with_running_time_at_the_runs_hourly_price(api: httpx.Client, emu: EmulatorServer,
                                                                  rl_config: dict) -> None:
    created = api.post("/training/runs", json={"config": {**rl_config, "max_steps": 200}}).json()
    run_id, hourly = created["runId"], created["estimatedCostPerHour"]
    queued = api.get(f"/billing/runs/{run_id}/usage").json()
    assert (queued["total_tokens"], queued["total_cost_usd"], queued["record_count"]) == (0, 0.0, 0)
    emu.state.advance(T.queue_seconds + T.startup_seconds)  # queue and start-up (image pull) are not billed
    assert api.get(f"/billing/runs/{run_id}/usage").json()["total_cost_usd"] == 0.0
    emu.state.advance(1800)  # half an hour training
    usage = api.get(f"/billing/runs/{run_id}/usage").json()
    assert usage["total_cost_usd"] == pytest.approx(0.5 * hourly, abs=1e-4)
    assert usage["total_cost_usd"] == pytest.approx(usage["training"]["cost_usd"] + usage["inference"]["cost_usd"])
    assert usage["record_count"] == 30 and usage["status"] == "RUNNING"
    training = usage["training"]
    assert training["tokens"] == training["input_tokens"] + training["output_tokens"] > 0
    assert usage["total_tokens"] == training["tokens"] + usage["inference"]["tokens"]
    pricing = usage["pricing"]
    assert set(pricing) == {"training_per_mtok", "inference_input_per_mtok", "inference_output_per_mtok"}
    assert training["cost_usd"] == pytest.approx(training["tokens"] / 1e6 * pricing["training_per_mtok"], rel=1e-4)

    emu.state.advance(1800)
    assert api.get(f"/billing/runs/{run_id}/usage").json()["total_cost_usd"] == pytest.approx(hourly, abs=1e-4)
    emu.state.advance(done_after(200))
    done = api.get(f"/billing/runs/{run_id}/usage").json()
    run = get_run(api, run_id)
    ran = emu.state.clock.from_iso(run["completedAt"]) - emu.state.clock.from_iso(run["startedAt"]) - T.startup_seconds
    assert done["total_cost_usd"] == pytest.approx(ran / 3600 * hourly, abs=1e-4)
    emu.state.advance(7200)
    assert api.get(f"/billing/runs/{run_id}/usage").json() == done  # a finished run costs nothing more


def test_usage_of_a_reserved_run_counts_tokens_without_a_price(api: httpx.Client, emu: EmulatorServer,
                                                               rl_config: dict) -> None:
    run_id = create(api, rl_config, teamId=TEAM_RESEARCH_ID)
    emu.state.advance(T.queue_seconds + 600)
    usage = api.get(f"/billing/runs/{run_id}/usage").json()
    assert usage["total_tokens"] > 0 and usage["total_cost_usd"] == 0.0
    assert usage["pricing"] == {"training_per_mtok": None, "inference_input_per_mtok": None,
                                "inference_output_per_mtok": None}


# -- dashboard ---------------------------------------------------------------------------------------

def test_the_dashboard_page_of_a_run_shows_status_steps_and_latest_metrics(api: httpx.Client, emu: EmulatorServer,
                                                                          rl_config: dict) -> None:
    run_id = create(api, {**rl_config, "ckpt": {"interval": 5}}, name="reverse-demo")
    url = emu.dashboard_url(run_id)
    assert url == f"{emu.base_url}/dashboard/training/{run_id}"
    emu.state.advance(at_step(6) + 1)
    page = httpx.get(url)  # a browser: no API key
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    html = page.text
    last = api.get(f"/rft/runs/{run_id}/metrics").json()["metrics"][-1]
    for needle in ("reverse-demo", run_id, "Status: RUNNING", "step 6 of 20", "reward/all/mean",
                   str(last["reward/all/mean"]), "reverse-text", "Running", "READY"):
        assert needle in html, needle
    assert not re.search(r"<script|<link|src=|https?://", html)  # plain HTML, nothing fetched
    index = httpx.get(f"{emu.base_url}/dashboard/training").text
    assert f'href="/dashboard/training/{run_id}"' in index
    missing = httpx.get(f"{emu.base_url}/dashboard/training/cnothere")
    assert missing.status_code == 404 and "not found" in missing.text


def test_the_dashboard_shows_a_failed_runs_root_cause(api: httpx.Client, emu: EmulatorServer, rl_config: dict) -> None:
    emu.state.set_scenario("fail", at_step=2)
    run_id = create(api, rl_config)
    emu.state.advance(at_step(5))
    html = httpx.get(emu.dashboard_url(run_id)).text
    assert "Status: FAILED" in html and "trainer pod OOMKilled" in html and "CUDA OOM in trainer" in html


def test_the_dashboard_answers_loopback_clients_only(emu: EmulatorServer) -> None:
    transport = httpx.ASGITransport(app=create_app(emu.state, emu.faults), client=("10.1.2.3", 4000))

    async def ask() -> int:
        async with httpx.AsyncClient(transport=transport, base_url="http://emulator") as client:
            return (await client.get("/dashboard/training")).status_code

    import asyncio

    assert asyncio.run(ask()) == 403
