"""The emulator does not invent what the platform does not: a paused run resumes once, the
concurrent-run limit whoami advertises holds, a page over 100 runs is refused with FastAPI's own
message, a resumed run keeps its source pin, the advantages histogram is the samples', and a
GPU type listed as busy queues longer. Real HTTP against the emulator, its clock stopped.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from _helpers import T, at_step
from test_emulator import _client, create, get_run, logs

from skill.emulator import TEAM_RESEARCH_ID, EmulatorServer


@pytest.fixture
def api(emulator: EmulatorServer):
    with _client(emulator) as client:
        yield client


def paused(api: httpx.Client, emulator: EmulatorServer, config: dict[str, Any], **body: Any) -> str:
    run_id = create(api, config, **body)
    emulator.state.advance(at_step(3) + 1)
    assert api.post(f"/training/runs/{run_id}/pause").status_code == 200
    emulator.state.advance(T.pause_seconds + T.checkpoint_upload_seconds)
    assert get_run(api, run_id)["status"] == "PAUSED"
    return run_id


def test_a_paused_run_is_resumed_once(api: httpx.Client, emulator: EmulatorServer, rl_config: dict) -> None:
    run_id = paused(api, emulator, rl_config)
    first = api.post(f"/training/runs/{run_id}/resume", json={})
    assert first.status_code == 200
    again = api.post(f"/training/runs/{run_id}/resume", json={})
    assert again.status_code == 409 and first.json()["runId"] in again.json()["detail"]
    by_body = api.post("/training/runs", json={"config": rl_config, "resumeFrom": run_id})
    assert by_body.status_code == 409 and "already resumed" in by_body.json()["detail"]
    # the run it became can be paused and resumed in its turn
    new_id = first.json()["runId"]
    emulator.state.advance(at_step(2) + 1)
    assert api.post(f"/training/runs/{new_id}/pause").status_code == 200
    emulator.state.advance(T.pause_seconds + T.checkpoint_upload_seconds)
    assert api.post(f"/training/runs/{new_id}/resume", json={}).status_code == 200


def test_a_resumed_run_keeps_the_source_pin_and_image_of_the_paused_one(api: httpx.Client, emulator: EmulatorServer,
                                                                      rl_config: dict) -> None:
    run_id = paused(api, emulator, rl_config, sourceRef="v0.5.0", imageTag="v0.5.0")
    before = get_run(api, run_id)
    emulator.state.set_scenario("image_pull_slow", seconds=600)  # its pods log the image they pull
    resumed = api.post(f"/training/runs/{run_id}/resume", json={}).json()["runId"]
    assert get_run(api, resumed)["sourceCommit"] == before["sourceCommit"] is not None
    emulator.state.advance(T.queue_seconds + T.startup_seconds + 590)
    pulled = logs(api, resumed, component="trainer", search="Pulling image", since_seconds=3600)
    assert pulled and all("prime-rl:v0.5.0" in line for line in pulled)


def test_the_concurrent_run_limit_whoami_advertises_is_kept(api: httpx.Client, emulator: EmulatorServer,
                                                            rl_config: dict) -> None:
    limit = api.get("/user/whoami").json()["data"]["account_limits"]["max_concurrent_training_runs"]
    runs = [create(api, rl_config) for _ in range(limit)]
    over = api.post("/training/runs", json={"config": rl_config})
    assert over.status_code == 409 and f"{limit} of {limit}" in over.json()["detail"]
    assert create(api, rl_config, teamId=TEAM_RESEARCH_ID)  # a team's runs count on the team's account
    assert api.put(f"/rft/runs/{runs[0]}/stop").status_code == 200
    runs.append(create(api, rl_config))  # a place was freed
    emulator.state.advance(at_step(3) + 1)
    api.post(f"/training/runs/{runs[1]}/pause")
    emulator.state.advance(T.pause_seconds + T.checkpoint_upload_seconds)
    assert create(api, rl_config)  # a paused run released its GPUs
    assert api.post("/training/runs", json={"config": rl_config}).status_code == 409


def test_a_page_of_more_than_100_runs_is_refused_with_fastapis_message(api: httpx.Client) -> None:
    [too_big] = api.get("/rft/runs", params={"limit": 101}).json()["detail"]
    assert (too_big["loc"], too_big["type"], too_big["msg"]) == (
        ["query", "limit"], "less_than_equal", "Input should be less than or equal to 100")
    [too_small] = api.get("/rft/runs", params={"limit": 0}).json()["detail"]
    assert (too_small["type"], too_small["msg"]) == ("greater_than_equal", "Input should be greater than or equal to 1")
    [page] = api.get("/rft/runs", params={"page": 0}).json()["detail"]
    assert page["loc"] == ["query", "page"] and page["type"] == "greater_than_equal"


def test_more_than_100_runs_are_listed_over_two_pages(api: httpx.Client, emulator: EmulatorServer,
                                                      rl_config: dict) -> None:
    for _ in range(101):
        api.put(f"/rft/runs/{create(api, rl_config)}/stop")  # stopped at once while queued: no place held
    first = api.get("/rft/runs", params={"limit": 100}).json()
    second = api.get("/rft/runs", params={"limit": 100, "page": 2}).json()
    assert (first["total"], first["total_pages"], len(first["runs"]), len(second["runs"])) == (101, 2, 100, 1)


def test_the_advantages_histogram_is_the_samples_advantages(api: httpx.Client, emulator: EmulatorServer,
                                                            rl_config: dict) -> None:
    run_id = create(api, rl_config)
    emulator.state.advance(at_step(5) + 1)
    samples = api.get(f"/rft/runs/{run_id}/samples", params={"step": 5, "limit": 100}).json()["samples"]
    bins = api.get(f"/rft/runs/{run_id}/distributions", params={"type": "advantages", "step": 5}
                   ).json()["chartData"]["histogramData"]
    assert sum(b["count"] for b in bins) == len(samples)
    negative = sum(1 for s in samples if s["advantage"] < 0)
    assert negative > 0 and sum(b["count"] for b in bins if b["binEnd"] <= 0) == negative
    assert min(b["binStart"] for b in bins) == -1.0


def test_a_gpu_type_listed_as_busy_queues_longer(api: httpx.Client, emulator: EmulatorServer,
                                                 rl_config: dict) -> None:
    prices = api.get("/training/available-fft-models").json()
    listed = {g["gpuType"]: g["availableNow"] for g in prices["onDemand"]
              if isinstance(g, dict) and "gpuType" in g}
    busy = create(api, rl_config, gpuType="B200_180GB")
    free = create(api, rl_config, gpuType="H200_141GB")
    emulator.state.advance(T.queue_seconds + 1)
    assert get_run(api, free)["status"] == "RUNNING"
    waiting = get_run(api, busy)
    assert waiting["status"] == "QUEUED" and "none free now" in waiting["queueReason"]
    emulator.state.advance(3 * T.queue_seconds)
    assert get_run(api, busy)["status"] == "RUNNING"
    assert listed.get("B200_180GB") is False and listed.get("H200_141GB") is True
