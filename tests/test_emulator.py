"""The emulator over real HTTP (httpx against uvicorn on loopback).

Most tests freeze the simulated clock (``speed 0``) and move it with ``advance`` so every
state is exact; the default timeline is 60 s queued, 90 s start-up, 30 s per step, 10 s
finalize (simulated).
"""

from __future__ import annotations

import itertools
import json
import re
import socket
import time
import tomllib
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from _helpers import T, at_step

from skill.emulator import (
    DEFAULT_USER_ID,
    OTHER_API_KEY,
    TEAM_EVALS_ID,
    TEAM_RESEARCH_ID,
    EmulatorServer,
    create_app,
)

CUID = re.compile(r"^c[a-z0-9]{24}$")
HEX40 = re.compile(r"^[0-9a-f]{40}$")


def done_after(steps: int) -> float:
    """Simulated seconds from creation until a ``steps``-step run is COMPLETED (plus slack)."""
    return at_step(steps) + T.finalize_seconds + T.checkpoint_upload_seconds + 1


@pytest.fixture
def emu(emulator: EmulatorServer) -> EmulatorServer:
    return emulator


def _client(emu: EmulatorServer, key: str | None = None, **headers: str) -> httpx.Client:
    auth = {"Authorization": f"Bearer {key or emu.api_key}"}
    return httpx.Client(base_url=emu.base_url + "/api/v1", headers={**auth, **headers}, timeout=10)


@pytest.fixture
def api(emu: EmulatorServer):
    with _client(emu) as client:
        yield client


@pytest.fixture
def other(emu: EmulatorServer):
    """The second seeded user (member of the research team only)."""
    with _client(emu, OTHER_API_KEY) as client:
        yield client


@pytest.fixture
def admin(emu: EmulatorServer):
    with httpx.Client(base_url=emu.base_url + "/_emulator", timeout=10) as client:
        yield client


def create(api: httpx.Client, config: dict[str, Any], **body: Any) -> str:
    response = api.post("/training/runs", json={"config": config, **body})
    assert response.status_code == 200, response.text
    return response.json()["runId"]


def get_run(api: httpx.Client, run_id: str) -> dict[str, Any]:
    response = api.get(f"/rft/runs/{run_id}")
    assert response.status_code == 200, response.text
    return response.json()["run"]


def logs(api: httpx.Client, run_id: str, **params: Any) -> list[str]:
    response = api.get(f"/rft/runs/{run_id}/logs", params=params)
    assert response.status_code == 200, response.text
    text = response.json()["logs"]
    return text.split("\n") if text else []


def completed_run(api: httpx.Client, emu: EmulatorServer, config: dict[str, Any], **body: Any) -> str:
    run_id = create(api, config, **body)
    emu.state.advance(done_after(config.get("max_steps", 20)))
    assert get_run(api, run_id)["status"] == "COMPLETED"
    return run_id


# -- auth, accounts, catalogue ------------------------------------------------------------------

def test_unknown_or_missing_key_is_401_in_each_hosts_error_shape(emu: EmulatorServer) -> None:
    with httpx.Client(base_url=emu.base_url + "/api/v1") as anon:
        missing = anon.get("/rft/runs")
        wrong = anon.get("/rft/runs", headers={"Authorization": "Bearer mf-not-a-key"})
        traces = anon.get("/traces", headers={"Authorization": "Bearer mf-not-a-key"})
    assert missing.status_code == wrong.status_code == traces.status_code == 401
    assert isinstance(wrong.json()["detail"], str)
    assert traces.json()["error"]["code"] == "unauthenticated"


def test_teams_members_and_whoami(api: httpx.Client, other: httpx.Client) -> None:
    me = api.get("/user/whoami").json()["data"]
    assert me["id"] == DEFAULT_USER_ID
    teams = api.get("/user/teams").json()
    assert teams["total_count"] == 2
    assert {t["teamId"]: t["role"] for t in teams["data"]} == {TEAM_RESEARCH_ID: "ADMIN", TEAM_EVALS_ID: "MEMBER"}
    assert all(CUID.match(t["teamId"]) and set(t) == {"teamId", "name", "slug", "role", "createdAt"}
               for t in teams["data"])
    assert len(api.get(f"/teams/{TEAM_RESEARCH_ID}/members").json()["data"]) == 2
    assert other.get(f"/teams/{TEAM_EVALS_ID}/members").status_code == 404
    assert other.get("/user/whoami", params={"teamId": TEAM_EVALS_ID}).status_code == 403
    assert other.get("/user/teams").json()["total_count"] == 1


def test_gpu_types_models_and_prices_depend_on_owner(api: httpx.Client) -> None:
    personal = api.get("/training/available-gpu-types").json()["gpuTypes"]
    research = api.get("/training/available-gpu-types", params={"team_id": TEAM_RESEARCH_ID}).json()["gpuTypes"]
    assert "A100_80GB" not in personal and "A100_80GB" in research
    assert {"H100_80GB", "H200_141GB", "B200_180GB"} <= set(personal)
    models = api.get("/training/available-fft-models").json()
    names = {m["name"] for m in models["models"]}
    assert {"PrimeIntellect/Qwen3-0.6B-Reverse-Text-SFT", "PrimeIntellect/Qwen3-0.6B", "Qwen/Qwen3-4B-Instruct-2507",
            "PrimeIntellect/Qwen3-1.7B-Wordle-SFT", "PrimeIntellect/Qwen3-1.7B"} <= names
    prices = {o["gpuType"]: o["pricePerGpuHour"] for o in models["onDemand"]}
    assert prices["H200_141GB"] == 2.5 and "A100_80GB" not in prices
    assert models["onDemandBetaAccess"] is True
    glm = next(m for m in models["models"] if m["name"] == "zai-org/GLM-4.5-Air")
    assert [c["gpuType"] for c in glm["clusters"]] == ["B200_180GB"]


# -- runs: create, scoping ------------------------------------------------------------------------

def test_create_returns_placement_and_the_run_carries_config_fields(api: httpx.Client, rl_config: dict) -> None:
    response = api.post("/training/runs", json={"config": rl_config, "name": "rt", "wandbApiKey": "fake-wandb-0"})
    body = response.json()
    assert set(body) == {"runId", "tokenValue", "onDemand", "gpuType", "pricePerGpuHour",
                         "estimatedCostPerHour", "isBeta"}
    assert CUID.match(body["runId"]) and "fake" in body["tokenValue"]
    assert (body["onDemand"], body["gpuType"], body["pricePerGpuHour"], body["estimatedCostPerHour"]) == \
        (True, "H200_141GB", 2.5, 5.0)
    run = get_run(api, body["runId"])
    expected = {"name": "rt", "userId": DEFAULT_USER_ID, "teamId": None, "kind": "DEDICATED_FULL_FT", "loss": "rl",
                "baseModel": "PrimeIntellect/Qwen3-0.6B-Reverse-Text-SFT", "maxSteps": 20, "batchSize": 128,
                "rolloutsPerExample": 16, "seqLen": 2048, "maxTokens": 128, "gpuCount": 2,
                "wandbProject": "reverse-text", "rftClusterId": None, "status": "QUEUED"}
    assert {k: run[k] for k in expected} == expected
    assert [e["id"] for e in run["environments"]] == ["reverse-text"]
    assert run["runConfig"] == rl_config
    assert "fake-wandb-0" not in json.dumps(run)


def test_reserved_and_explicit_gpu_types(api: httpx.Client, rl_config: dict) -> None:
    reserved = api.post("/training/runs", json={"config": rl_config, "teamId": TEAM_RESEARCH_ID}).json()
    assert set(reserved) == {"runId", "tokenValue"}  # reserved capacity: no price keys
    h100 = api.post("/training/runs", json={"config": rl_config, "gpuType": "H100_80GB"}).json()
    assert (h100["pricePerGpuHour"], h100["estimatedCostPerHour"]) == (1.8, 3.6)


@pytest.mark.parametrize(("body", "status", "needle"), [
    ({}, 422, "config"),
    ({"config": {"model": {"name": "acme/Unknown-7B"}, "inference": {}}}, 400, "acme/Unknown-7B"),
    ({"config": "RL", "gpuType": "H200_141GB"}, 422, "config"),
    ({"gpuType": "TPU_V5"}, 400, "TPU_V5"),
    ({"gpuType": "A100_80GB"}, 400, "A100_80GB"),
    ({"volume": "no-such-volume"}, 400, "no-such-volume"),
    ({"teamId": "cteam00000000000000000099"}, 403, "member"),
    ({"config": {"model": "Qwen/Qwen3-4B-Instruct-2507", "env": [{"id": "x"}]}}, 400, "retired"),
    ({"config": {"model": {"name": "PrimeIntellect/Qwen3-0.6B"}, "inference": {"deployment": {"type":
      "disaggregated"}}}}, 422, "disaggregated"),
    ({"config": {"model": {"name": "PrimeIntellect/Qwen3-0.6B"}}}, 422, "inference"),
    ({"config": {"model": {"name": "zai-org/GLM-4.5-Air"}, "inference": {}}, "gpuType": "H100_80GB"}, 400, "B200"),
    ({"mode": "dpo"}, 422, "mode"),
    ({"config": {"model": {"name": "PrimeIntellect/Qwen3-0.6B"}, "data": {"name": "x"}, "inference": {}}},
     422, "extra_forbidden"),  # an SFT config sent without mode=sft
])
def test_create_rejects_like_the_platform(api: httpx.Client, emu: EmulatorServer, rl_config: dict,
                                          body: dict, status: int, needle: str) -> None:
    payload = {"config": rl_config, **body} if body else {}
    response = api.post("/training/runs", json=payload)
    assert response.status_code == status, response.text
    assert needle in json.dumps(response.json()["detail"])
    assert emu.state.summary()["run_count"] == 0


def test_gpu_count_from_deployment_and_sft_runs(api: httpx.Client, emu: EmulatorServer, examples_dir: Path) -> None:
    def load(path: str) -> dict:
        return tomllib.loads((examples_dir / path).read_text())

    math_run = get_run(api, create(api, load("advanced/qwen3-30b-a3b/math.toml")))
    assert math_run["gpuCount"] == (2 + 2 * 1) * 8
    glm = get_run(api, create(api, load("advanced/glm-4.5-air/swe.toml"), gpuType="B200_180GB"))
    assert glm["gpuCount"] == (1 + 1 * 3) * 8
    assert get_run(api, create(api, load("basic/wiki-search/rl.toml")))["gpuCount"] == 8
    sft_id = create(api, load("basic/reverse-text/sft.toml"), mode="sft")
    sft = get_run(api, sft_id)
    assert (sft["loss"], sft["batchSize"], sft["seqLen"], sft["maxSteps"], sft["environments"]) == \
        ("sft", 32, 4096, 100, [])
    emu.state.advance(at_step(1) + 1)
    assert [e["env_name"] for e in api.get(f"/rft/runs/{sft_id}/env-servers").json()["env_servers"]] == \
        ["reverse-text"]
    assert any("loss" in line for line in logs(api, sft_id))  # the trainer is an SFT run's primary component
    assert "reward/all/mean" not in api.get(f"/rft/runs/{sft_id}/metrics").json()["metrics"][0]


def test_runs_are_scoped_to_their_owner(api: httpx.Client, other: httpx.Client, rl_config: dict) -> None:
    personal = create(api, rl_config)
    research = create(api, rl_config, teamId=TEAM_RESEARCH_ID)
    evals = create(api, rl_config, teamId=TEAM_EVALS_ID)

    def ids(client: httpx.Client, **params: Any) -> list[str]:
        response = client.get("/rft/runs", params=params)
        assert response.status_code == 200, response.text
        return [r["id"] for r in response.json()["runs"]]

    assert ids(api) == [personal]
    assert ids(api, teamId=TEAM_RESEARCH_ID) == [personal]  # the wrong spelling is ignored, as on the platform
    assert ids(api, team_id=TEAM_RESEARCH_ID) == [research]
    assert ids(api, team_id=TEAM_EVALS_ID) == [evals]
    assert ids(other) == []
    assert ids(other, team_id=TEAM_RESEARCH_ID) == [research]
    assert ids(other, team_id=TEAM_RESEARCH_ID, mine="true") == []
    assert other.get("/rft/runs", params={"team_id": TEAM_EVALS_ID}).status_code == 403
    assert other.get(f"/rft/runs/{research}").status_code == 200
    for hidden in (personal, evals):
        response = other.get(f"/rft/runs/{hidden}")
        assert response.status_code == 404 and response.json() == {"detail": "Run not found"}
        assert other.get(f"/rft/runs/{hidden}/logs").status_code == 404


def test_run_list_pages_newest_first(api: httpx.Client, emu: EmulatorServer, rl_config: dict) -> None:
    made = []
    for _ in range(5):
        made.append(create(api, rl_config))
        emu.state.advance(1)
    page = api.get("/rft/runs", params={"page": 2, "limit": 2}).json()
    assert (page["total"], page["page"], page["limit"], page["total_pages"]) == (5, 2, 2, 3)
    assert [r["id"] for r in page["runs"]] == list(reversed(made))[2:4]
    assert api.get("/rft/runs", params={"page": 0}).status_code == 422


# -- lifecycle ------------------------------------------------------------------------------------

def test_lifecycle_queued_running_completed(api: httpx.Client, emu: EmulatorServer, rl_config: dict) -> None:
    run_id = create(api, rl_config)
    run = get_run(api, run_id)
    assert (run["status"], run["runsAhead"], run["startedAt"], run["primeClusterId"]) == ("QUEUED", 3, None, None)
    assert "H200_141GB" in run["queueReason"]
    queued_logs = api.get(f"/rft/runs/{run_id}/logs", params={"tail_lines": 1000})
    assert queued_logs.status_code == 404
    assert queued_logs.json() == {"detail": "Run is queued; logs are not available yet"}
    assert api.get(f"/rft/runs/{run_id}/env-servers").json() == {"env_servers": []}

    emu.state.advance(T.queue_seconds + 1)
    run = get_run(api, run_id)
    assert (run["status"], run["runsAhead"], run["queueReason"]) == ("RUNNING", None, None)
    assert run["startedAt"] and CUID.match(run["primeClusterId"])
    assert api.get(f"/rft/runs/{run_id}/progress").json()["latestStep"] is None
    assert api.get(f"/rft/runs/{run_id}/env-servers").json()["env_servers"][0]["status"] == "Pending"

    emu.state.advance(T.startup_seconds + 3 * T.step_seconds)
    progress = api.get(f"/rft/runs/{run_id}/progress").json()
    assert progress["latestStep"] == 3 and progress["stepsWithSamples"] == []
    assert api.get(f"/rft/runs/{run_id}/env-servers").json()["env_servers"] == [
        {"env_name": "reverse-text", "env_index": 0, "pod_name": f"{run_id}-env-reverse-text-0", "status": "Running"}]

    emu.state.advance(done_after(20) - at_step(3))
    run = get_run(api, run_id)
    assert run["status"] == "COMPLETED" and run["completedAt"] >= run["startedAt"]
    progress = api.get(f"/rft/runs/{run_id}/progress").json()
    assert progress["latestStep"] == 20
    assert progress["stepsWithSamples"] == [5, 10, 15, 20] == progress["stepsWithDistributions"]
    assert progress["lastUpdatedAt"] == api.get(f"/rft/runs/{run_id}/metrics").json()["metrics"][-1]["timestamp"]
    checkpoints = api.get(f"/rft/runs/{run_id}/checkpoints").json()["checkpoints"]
    assert [(c["step"], c["status"], c["rftRunId"]) for c in checkpoints] == [(20, "READY", run_id)]
    assert api.get(f"/rft/runs/{run_id}/checkpoints", params={"status_filter": "UPLOADING"}).json() == \
        {"checkpoints": []}
    assert api.get(f"/rft/runs/{run_id}/env-servers").json()["env_servers"][0]["status"] == "Completed"
    usage = api.get(f"/billing/runs/{run_id}/usage").json()
    assert usage["status"] == "COMPLETED"
    assert usage["total_cost_usd"] == pytest.approx(usage["training"]["cost_usd"] + usage["inference"]["cost_usd"])


def test_checkpoint_interval_and_upload_status(api: httpx.Client, emu: EmulatorServer, rl_config: dict) -> None:
    run_id = create(api, {**rl_config, "ckpt": {"interval": 5}})
    emu.state.advance(at_step(10))
    checkpoints = api.get(f"/rft/runs/{run_id}/checkpoints").json()["checkpoints"]
    assert [(c["step"], c["status"]) for c in checkpoints] == [(5, "READY"), (10, "UPLOADING")]
    assert checkpoints[1]["uploadedAt"] is None


def test_date_header_is_the_simulated_now(api: httpx.Client, emu: EmulatorServer) -> None:
    emu.state.advance(7200)
    served = parsedate_to_datetime(api.get("/user/whoami").headers["date"]).timestamp()
    assert served == pytest.approx(emu.state.clock.epoch + emu.state.now(), abs=1.5)
    assert served > time.time() + 7000


# -- logs, metrics, samples -----------------------------------------------------------------------

def test_logs_components_and_filters(api: httpx.Client, emu: EmulatorServer, rl_config: dict) -> None:
    run_id = completed_run(api, emu, rl_config)
    orchestrator = logs(api, run_id, tail_lines=1000)
    entries = [json.loads(line) for line in orchestrator]
    assert all({"timestamp", "level", "message", "tag"} <= set(e) for e in entries)
    assert any(e.get("type") == "progress" for e in entries)
    assert any(e["message"].startswith("Step 20/20") for e in entries)
    assert len(logs(api, run_id, tail_lines=3)) == 3

    trainer = logs(api, run_id, component="trainer")
    assert trainer and all(line.startswith("[rank0]: ") for line in trainer)
    assert any("loss" in line for line in trainer)
    assert any("vLLM" in line for line in logs(api, run_id, component="inference"))
    env = logs(api, run_id, component="env-server", env_name="reverse-text")
    assert any("served 128 rollouts for step 20" in line for line in env)
    assert api.get(f"/rft/runs/{run_id}/logs", params={"component": "env-server", "env_name": "nope"}
                   ).status_code == 404
    legacy = api.get(f"/rft/runs/{run_id}/env-server-logs", params={"env_name": "reverse-text", "env_index": 0})
    assert "served" in legacy.json()["logs"]

    warnings = logs(api, run_id, level="WARNING", since_seconds=86400)
    assert len(warnings) == 2 and all(json.loads(w)["level"] == "WARNING" for w in warnings)
    all_levels = logs(api, run_id, component="trainer", level="DEBUG", since_seconds=86400)
    assert len(all_levels) == 2  # steps 10 and 20
    assert logs(api, run_id, search="Step 1", since_seconds=86400) == \
        [line for line in orchestrator if "Step 1" in line]
    steps = logs(api, run_id, search=r"Step \d+/20 \|", regex="true", since_seconds=86400)
    assert len(steps) == 20
    emu.state.advance(3600)  # filtered reads look back 15 minutes unless since_seconds says more
    assert logs(api, run_id, level="WARNING") == []
    assert len(logs(api, run_id, level="WARNING", since_seconds=86400)) == 2
    for bad in ({"tail_lines": 0}, {"tail_lines": 5001}, {"since_seconds": 10}, {"level": "LOUD"}):
        assert api.get(f"/rft/runs/{run_id}/logs", params=bad).status_code == 422, bad
    assert api.get(f"/rft/runs/{run_id}/logs", params={"search": "(", "regex": "true"}).status_code == 400


def test_unfiltered_orchestrator_reads_come_from_a_200_line_snapshot(api: httpx.Client, emu: EmulatorServer,
                                                                     rl_config: dict) -> None:
    run_id = create(api, {**rl_config, "max_steps": 100})
    emu.state.advance(at_step(100))
    assert len(logs(api, run_id, tail_lines=1000)) == 200
    assert len(logs(api, run_id, tail_lines=1000, since_seconds=86400)) > 200


def test_metrics_filters_and_rising_reward(api: httpx.Client, emu: EmulatorServer, rl_config: dict) -> None:
    run_id = completed_run(api, emu, rl_config)
    records = api.get(f"/rft/runs/{run_id}/metrics").json()["metrics"]
    assert [r["step"] for r in records] == list(range(1, 21))
    assert {"step", "timestamp", "reward/all/mean", "loss", "entropy"} <= set(records[0])
    rewards = [r["reward/all/mean"] for r in records]
    assert sum(rewards[-5:]) / 5 > sum(rewards[:5]) / 5 + 0.2
    assert any(b < a for a, b in itertools.pairwise(rewards))  # noisy, not monotonic
    window = api.get(f"/rft/runs/{run_id}/metrics", params={"min_step": 5, "max_step": 8}).json()["metrics"]
    assert [r["step"] for r in window] == [5, 6, 7, 8]
    assert [r["step"] for r in api.get(f"/rft/runs/{run_id}/metrics", params={"limit": 2}).json()["metrics"]] == [1, 2]


def test_samples_and_distributions(api: httpx.Client, emu: EmulatorServer, rl_config: dict) -> None:
    run_id = completed_run(api, emu, rl_config)
    page = api.get(f"/rft/runs/{run_id}/samples", params={"step": 5, "page": 2, "limit": 10}).json()
    assert (page["run_id"], page["total"], page["page"], page["total_pages"], len(page["samples"])) == \
        (run_id, 32, 2, 4, 10)
    assert api.get(f"/rft/runs/{run_id}/samples", params={"step": 3}).json()["total"] == 0
    dist = api.get(f"/rft/runs/{run_id}/distributions").json()
    assert dist["step"] == 20 and sum(b["count"] for b in dist["chartData"]["histogramData"]) == 32  # the samples
    assert api.get(f"/rft/runs/{run_id}/distributions", params={"type": "colours"}).status_code == 400


# -- traces -----------------------------------------------------------------------------------------

def test_traces_pages_with_cursors_and_raw_documents(api: httpx.Client, emu: EmulatorServer,
                                                      rl_config: dict) -> None:
    run_id = completed_run(api, emu, rl_config)
    seen: list[dict] = []
    cursor, pages = None, 0
    while True:
        params = {"run_id": run_id, "limit": 100, **({"cursor": cursor} if cursor else {})}
        page = api.get("/traces", params=params).json()
        seen += page["items"]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 4 and len(seen) == 320 == len({t["trace_id"] for t in seen})
    created = [t["created_at"] for t in seen]
    assert created == sorted(created, reverse=True)  # newest first
    assert {t["context"]["run_type"] for t in seen} == {"train"} and {t["run_id"] for t in seen} == {run_id}
    assert sorted({t["run_step"] for t in seen}) == list(range(1, 21))
    first = api.get("/traces", params={"run_id": run_id, "limit": 5}).json()
    changed = api.get("/traces", params={"run_id": run_id, "limit": 5, "environment_id": "reverse-text",
                                         "cursor": first["next_cursor"]})
    assert changed.status_code == 400 and changed.json()["error"]["code"] == "invalid_cursor"
    assert api.get("/traces", params={"limit": 101}).json()["error"]["code"] == "invalid_filter"

    trace = seen[0]
    raw = api.get(f"/traces/{trace['trace_id']}", params={"raw": "true"})
    doc = json.loads(raw.content)
    assert (doc["version"], doc["id"], len(raw.content)) == (4, trace["trace_id"], trace["size_bytes"])
    assert [n["message"]["role"] for n in doc["nodes"]] == ["system", "user", "assistant"]
    assert api.get(f"/traces/{trace['trace_id']}").json() == trace
    missing = api.get("/traces/tr-nope")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "trace_not_found"

    scored = api.get("/traces", params={"run_id": run_id, "reward_min": 0.9, "limit": 100}).json()["items"]
    assert scored and all(t["score"]["reward"] >= 0.9 for t in scored)
    by_reward = api.get("/traces", params={"run_id": run_id, "sort": "reward", "limit": 10}).json()["items"]
    assert [t["score"]["reward"] for t in by_reward] == sorted((t["score"]["reward"] for t in by_reward), reverse=True)


def test_run_summary_steps_and_episodes_agree_with_the_traces(api: httpx.Client, emu: EmulatorServer,
                                                              rl_config: dict) -> None:
    run_id = completed_run(api, emu, rl_config)
    summary = api.get(f"/runs/{run_id}").json()
    assert (summary["trace_count"], summary["episode_count"], summary["step_count"], summary["step_min"],
            summary["step_max"]) == (320, 80, 20, 1, 20)
    assert summary["context"] == {"source": "prime-rl", "run_type": "train"}
    steps = api.get(f"/runs/{run_id}/steps").json()
    assert steps["step_count"] == 20 and [s["step"] for s in steps["items"]] == list(range(1, 21))
    assert all((s["trace_count"], s["episode_count"]) == (16, 4) for s in steps["items"])
    newest = api.get("/traces", params={"run_id": run_id, "limit": 100}).json()["items"]
    rewards = [t["score"]["reward"] for t in newest if t["run_step"] == 18 and t["score"]["reward"] is not None]
    assert steps["items"][17]["avg_reward"] == pytest.approx(sum(rewards) / len(rewards), abs=1e-6)

    episodes = api.get("/episodes", params={"run_id": run_id, "run_step": 3}).json()["items"]
    assert len(episodes) == 4
    detail = api.get(f"/episodes/{episodes[0]['episode_id']}").json()
    members = api.get(f"/episodes/{episodes[0]['episode_id']}/traces").json()["items"]
    envelope = json.loads(api.get(f"/episodes/{episodes[0]['episode_id']}", params={"raw": "true"}).content)
    assert detail["traces"]["trace_count"] == 4 == len(members)
    assert sorted(envelope["traces"]) == sorted(t["trace_id"] for t in members)
    assert all(t["run_step"] == 3 for t in members)

    assert api.get("/runs/cnothere").json()["error"]["code"] == "run_not_found"
    assert api.get("/runs/cnothere/steps").json() == {"step_min": None, "step_max": None, "step_count": 0, "items": []}


def test_eval_traces_form_their_own_eval_run(api: httpx.Client, emu: EmulatorServer, rl_config: dict) -> None:
    run_id = completed_run(api, emu, rl_config)
    evals = api.get("/runs", params={"run_type": "eval"}).json()["items"]
    assert [r["run_id"] for r in evals] == [f"{run_id}-eval"]
    assert evals[0]["context"] == {"source": "prime-rl", "run_type": "eval", "train_run_id": run_id}
    items = api.get("/traces", params={"run_id": f"{run_id}-eval", "limit": 100}).json()["items"]
    assert sorted({t["run_step"] for t in items}) == [5, 10, 15, 20] and len(items) == 16
    trains = api.get("/runs", params={"run_type": "train"}).json()["items"]
    assert [r["run_id"] for r in trains] == [run_id]


def test_search_finds_text_in_raw_documents(api: httpx.Client, emu: EmulatorServer, rl_config: dict) -> None:
    run_id = completed_run(api, emu, rl_config)
    page = api.get(f"/runs/{run_id}/search", params={"query": "Reverse the text", "role": "user", "limit": 10}).json()
    assert len(page["items"]) == 10 and page["next_cursor"]
    assert page["coverage"]["examined_traces"] == 320
    hit = page["items"][0]
    assert hit["excerpt"][hit["match_start"] - hit["excerpt_start"]:].startswith("Reverse the text")
    assert api.get(f"/runs/{run_id}/search", params={"query": "ab"}).status_code == 400


def test_traces_land_after_ingest_and_follow_the_team_header(emu: EmulatorServer, api: httpx.Client,
                                                             other: httpx.Client, rl_config: dict) -> None:
    run_id = create(api, rl_config, teamId=TEAM_RESEARCH_ID)
    emu.state.advance(at_step(1) + 0.5)
    with _client(emu, **{"X-Prime-Team-ID": TEAM_RESEARCH_ID}) as team:
        assert team.get("/traces", params={"run_id": run_id}).json()["items"] == []  # not ingested yet
        emu.state.advance(T.trace_ingest_seconds)
        assert len(team.get("/traces", params={"run_id": run_id}).json()["items"]) == 16
    assert api.get("/traces", params={"run_id": run_id}).json()["items"] == []  # personal scope
    with _client(emu, OTHER_API_KEY, **{"X-Prime-Team-ID": TEAM_RESEARCH_ID}) as mate:
        assert len(mate.get("/traces", params={"run_id": run_id}).json()["items"]) == 16
    with _client(emu, OTHER_API_KEY, **{"X-Prime-Team-ID": TEAM_EVALS_ID}) as stranger:
        denied = stranger.get("/traces")
        assert denied.status_code == 403 and denied.json()["error"]["code"] == "forbidden"


# -- scenarios ----------------------------------------------------------------------------------------

def test_fail_scenario(api: httpx.Client, emu: EmulatorServer, rl_config: dict) -> None:
    emu.state.set_scenario("fail", at_step=4)
    run_id = create(api, rl_config)
    emu.state.advance(at_step(10))
    run = get_run(api, run_id)
    assert (run["status"], run["errorMessage"]) == ("FAILED", "trainer pod OOMKilled")
    assert run["completedAt"] is not None
    analysis = run["failureAnalysis"]
    assert set(analysis) == {"rootCause", "evidence", "confidence"} and "step 4" in analysis["rootCause"]
    assert 0 < analysis["confidence"] <= 1 and analysis["evidence"]
    assert api.get(f"/rft/runs/{run_id}/progress").json()["latestStep"] == 3
    errors = logs(api, run_id, component="trainer", level="ERROR", since_seconds=86400)
    assert any("OutOfMemoryError" in line for line in errors)
    assert logs(api, run_id, level="ERROR", since_seconds=86400)

    emu.state.set_scenario("fail", at_step=1, analysis=False, error_message="image pull failed")
    plain = create(api, rl_config)
    emu.state.advance(at_step(2))
    run = get_run(api, plain)
    assert (run["status"], run["errorMessage"], run["failureAnalysis"]) == ("FAILED", "image pull failed", None)


def test_stall_scenario_freezes_progress_until_restart(api: httpx.Client, emu: EmulatorServer,
                                                       rl_config: dict) -> None:
    emu.state.set_scenario("stall", at_step=2)
    run_id = create(api, rl_config)
    emu.state.advance(at_step(8))
    stalled = api.get(f"/rft/runs/{run_id}/progress").json()
    emu.state.advance(3600)
    assert get_run(api, run_id)["status"] == "RUNNING"
    assert api.get(f"/rft/runs/{run_id}/progress").json() == stalled
    assert stalled["latestStep"] == 2
    restarted = api.put(f"/rft/runs/{run_id}/restart").json()["run"]
    assert restarted["status"] == "RUNNING"
    emu.state.advance(T.startup_seconds + 3 * T.step_seconds)
    assert api.get(f"/rft/runs/{run_id}/progress").json()["latestStep"] == 3  # no checkpoint: back to step 0


def test_crash_loop_scenario(api: httpx.Client, emu: EmulatorServer, rl_config: dict) -> None:
    emu.state.set_scenario("crash_loop", at_step=1)
    run_id = create(api, rl_config)
    emu.state.advance(at_step(6))
    servers = api.get(f"/rft/runs/{run_id}/env-servers").json()["env_servers"]
    assert [(s["env_name"], s["status"]) for s in servers] == [("reverse-text", "CrashLoopBackOff")]
    env_errors = logs(api, run_id, component="env-server", env_name="reverse-text", level="ERROR", since_seconds=3600)
    assert len(env_errors) >= 6 and any("ModuleNotFoundError" in line for line in env_errors)
    assert any("unreachable" in line for line in logs(api, run_id, level="WARNING", since_seconds=3600))
    assert api.get(f"/rft/runs/{run_id}/progress").json()["latestStep"] == 1
    assert get_run(api, run_id)["status"] == "RUNNING"


def test_stay_queued_scenario(api: httpx.Client, emu: EmulatorServer, rl_config: dict) -> None:
    emu.state.set_scenario("stay_queued", runs_ahead=7, queue_reason="waiting for quota")
    run_id = create(api, rl_config)
    emu.state.advance(100_000)
    run = get_run(api, run_id)
    assert (run["status"], run["runsAhead"], run["queueReason"]) == ("QUEUED", 7, "waiting for quota")
    assert api.get(f"/rft/runs/{run_id}/logs").status_code == 404


def test_echo_wandb_key_scenario_puts_the_forwarded_value_in_a_trainer_line(
        api: httpx.Client, emu: EmulatorServer, rl_config: dict) -> None:
    canary = "canary-wandb-0000-fake"
    quiet = create(api, rl_config, wandbApiKey=canary)
    emu.state.set_scenario("echo_wandb_key")
    loud = create(api, rl_config, wandbApiKey=canary)
    emu.state.advance(at_step(1))
    assert any(canary in line for line in logs(api, loud, component="trainer"))
    for component in ("orchestrator", "trainer", "inference"):
        assert not any(canary in line for line in logs(api, quiet, component=component))


def test_missing_traces_scenario(api: httpx.Client, emu: EmulatorServer, rl_config: dict) -> None:
    emu.state.set_scenario("missing_traces", steps=[2, 3])
    run_id = completed_run(api, emu, rl_config)
    assert [s["step"] for s in api.get(f"/runs/{run_id}/steps").json()["items"]] == [1, *range(4, 21)]
    assert [m["step"] for m in api.get(f"/rft/runs/{run_id}/metrics").json()["metrics"]][:3] == [1, 2, 3]


def test_scenario_on_a_running_run_and_bad_names(api: httpx.Client, emu: EmulatorServer, rl_config: dict) -> None:
    run_id = create(api, rl_config)
    emu.state.advance(at_step(3))
    emu.state.set_scenario("fail", run_id=run_id, at_step=5)
    emu.state.advance(at_step(10))
    assert get_run(api, run_id)["status"] == "FAILED"
    with pytest.raises(ValueError):
        emu.state.set_scenario("meltdown")
    with pytest.raises(ValueError):
        emu.state.set_scenario("fail", at_step=0)


# -- interventions ----------------------------------------------------------------------------------

def test_stop_is_quick_and_final(api: httpx.Client, emu: EmulatorServer, rl_config: dict) -> None:
    run_id = create(api, rl_config)
    emu.state.advance(at_step(2))
    stopped = api.put(f"/rft/runs/{run_id}/stop").json()["run"]
    assert stopped["status"] == "STOPPED" and stopped["completedAt"]
    emu.state.advance(3600)
    assert get_run(api, run_id)["status"] == "STOPPED"
    assert api.get(f"/rft/runs/{run_id}/progress").json()["latestStep"] == 2
    queued = create(api, rl_config)
    assert api.put(f"/rft/runs/{queued}/stop").json()["run"]["status"] == "STOPPED"


def test_pause_then_resume_continues_from_the_paused_step(api: httpx.Client, emu: EmulatorServer,
                                                          rl_config: dict) -> None:
    run_id = create(api, rl_config)
    assert api.post(f"/training/runs/{run_id}/pause").status_code == 409  # still queued
    emu.state.advance(at_step(4) + 1)
    assert api.post(f"/training/runs/{run_id}/pause").json() == {"runId": run_id, "status": "PAUSING"}
    assert get_run(api, run_id)["status"] == "PAUSING"
    emu.state.advance(T.pause_seconds + T.checkpoint_upload_seconds)
    assert get_run(api, run_id)["status"] == "PAUSED"
    assert [c["step"] for c in api.get(f"/rft/runs/{run_id}/checkpoints").json()["checkpoints"]] == [4]
    resumed = api.post(f"/training/runs/{run_id}/resume", json={}).json()
    new_id = resumed["runId"]
    assert new_id != run_id and resumed["gpuType"] == "H200_141GB"
    emu.state.advance(done_after(16))
    assert get_run(api, new_id)["status"] == "COMPLETED"
    steps = [m["step"] for m in api.get(f"/rft/runs/{new_id}/metrics").json()["metrics"]]
    assert steps == list(range(5, 21))
    assert api.post(f"/training/runs/{new_id}/resume", json={}).status_code == 409
    assert api.post("/training/runs", json={"config": rl_config, "resumeFrom": new_id}).status_code == 409


def test_resume_from_in_the_create_body_keeps_the_paused_runs_volume(api: httpx.Client, emu: EmulatorServer,
                                                                     rl_config: dict) -> None:
    run_id = create(api, rl_config, teamId=TEAM_RESEARCH_ID, volume="research-data", sourceRef="main")
    assert HEX40.match(get_run(api, run_id)["sourceCommit"])
    emu.state.advance(at_step(2) + 1)
    api.post(f"/training/runs/{run_id}/pause")
    emu.state.advance(T.pause_seconds)
    resumed = create(api, rl_config, teamId=TEAM_RESEARCH_ID, resumeFrom=run_id)
    assert get_run(api, resumed)["volumeName"] == "research-data"
    emu.state.advance(at_step(1))
    assert [m["step"] for m in api.get(f"/rft/runs/{resumed}/metrics").json()["metrics"]] == [3]


def test_restart_goes_back_to_the_last_checkpoint(api: httpx.Client, emu: EmulatorServer, rl_config: dict) -> None:
    run_id = create(api, {**rl_config, "ckpt": {"interval": 3}})
    assert api.put(f"/rft/runs/{run_id}/restart").status_code == 409
    emu.state.advance(at_step(7) + T.checkpoint_upload_seconds)
    assert api.put(f"/rft/runs/{run_id}/restart").json()["run"]["status"] == "RUNNING"
    assert [m["step"] for m in api.get(f"/rft/runs/{run_id}/metrics").json()["metrics"]] == list(range(1, 7))
    emu.state.advance(T.startup_seconds + T.step_seconds)
    assert api.get(f"/rft/runs/{run_id}/progress").json()["latestStep"] == 7


def test_delete_hides_the_run(api: httpx.Client, emu: EmulatorServer, rl_config: dict) -> None:
    first, second = create(api, rl_config), create(api, rl_config)
    response = api.delete(f"/rft/runs/{first}")
    assert response.status_code == 204 and response.content == b""
    assert api.get(f"/rft/runs/{first}").status_code == 404
    assert api.delete(f"/training/runs/{second}").json() == {"runId": second, "deleted": True}
    assert api.get("/rft/runs").json()["total"] == 0


# -- prepare and volumes ----------------------------------------------------------------------------

def test_prepare_answers_the_local_validation_contract(api: httpx.Client, emu: EmulatorServer) -> None:
    prep = api.post("/training/runs/prepare", json={"mode": "rl", "teamId": None}).json()
    runtime = prep["runtime"]
    assert (prep["contract_version"], prep["mode"], prep["submission_supported"]) == (1, "rl", False)
    assert runtime["repository"] == "ghcr.io/primeintellect-ai/prime-rl"
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", runtime["digest"])
    assert HEX40.match(runtime["image_commit"]) and runtime["source_commit"] is None
    assert runtime["schema_commit"] == runtime["image_commit"]
    assert prep["schema_install"]["python"] == "3.12" and prep["schema_install"]["requirements"]
    pinned = api.post("/training/runs/prepare", json={"mode": "sft", "teamId": TEAM_EVALS_ID,
                                                      "sourceRef": "main"}).json()
    assert pinned["mode"] == "sft" and HEX40.match(pinned["runtime"]["source_commit"])
    assert pinned["runtime"]["schema_commit"] == pinned["runtime"]["source_commit"]
    assert api.post("/training/runs/prepare", json={"mode": "dpo", "teamId": None}).status_code == 422
    emu.state.prepare_available = False
    assert api.post("/training/runs/prepare", json={"mode": "rl", "teamId": None}).status_code == 404


def test_volumes_list_create_and_use(api: httpx.Client, emu: EmulatorServer, rl_config: dict) -> None:
    assert api.get("/training/volumes").json() == {"volumes": []}
    research = api.get("/training/volumes", params={"teamId": TEAM_RESEARCH_ID}).json()["volumes"]
    assert [(v["name"], v["status"]) for v in research] == [("research-data", "RUNNING")]
    assert {"name", "status", "clusterId", "pvcName"} <= set(research[0])
    made = api.post("/training/volumes", json={"name": "scratch", "size": "1Ti", "warm": True})
    assert made.status_code == 200 and made.json()["status"] == "PENDING"
    emu.state.advance(T.volume_ready_seconds)
    assert api.get("/training/volumes").json()["volumes"][0]["status"] == "RUNNING"
    assert api.post("/training/volumes", json={"name": "scratch", "size": "1Ti"}).status_code == 409
    assert api.post("/training/volumes", json={"name": "big", "size": "lots"}).status_code == 400
    run_id = create(api, rl_config, volume="scratch")
    assert get_run(api, run_id)["volumeName"] == "scratch"
    assert api.get("/rft/runs").json()["runs"][0]["volumeName"] is None  # only the detail read carries it


# -- faults -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("status", [401, 402, 403, 404, 409, 422, 429, 500, 502, 503])
def test_status_faults(api: httpx.Client, emu: EmulatorServer, status: int) -> None:
    emu.faults.status(status, "GET", "/rft/runs")
    response = api.get("/rft/runs")
    assert response.status_code == status
    assert "detail" in response.json()
    if status == 422:
        assert isinstance(response.json()["detail"], list)
    if status == 429:
        assert response.headers["retry-after"] == "1"
    assert api.get("/rft/runs").status_code == 200  # times=1: used up


def test_status_faults_on_the_traces_host_use_its_envelope(api: httpx.Client, emu: EmulatorServer) -> None:
    emu.faults.status(503, path="/traces", retry_after=7)
    response = api.get("/traces")
    assert response.status_code == 503 and response.headers["retry-after"] == "7"
    assert response.json()["error"]["code"] == "storage_unavailable"


def test_fault_matching_persistence_and_skip(api: httpx.Client, emu: EmulatorServer, rl_config: dict) -> None:
    run_id = create(api, rl_config)
    rule = emu.faults.status(500, "GET", "/rft/runs/*", times=None)
    assert [api.get(f"/rft/runs/{run_id}").status_code for _ in range(3)] == [500, 500, 500]
    assert api.get("/rft/runs").status_code == 200  # the glob needs a path below /rft/runs/
    assert api.put(f"/rft/runs/{run_id}/stop").status_code == 200  # method differs
    assert emu.faults.remove(rule.id) and rule.hits == 3
    emu.faults.status(502, "GET", "re:/api/v1/rft/runs/[^/]+/progress", skip=1)
    assert [api.get(f"/rft/runs/{run_id}/progress").status_code for _ in range(3)] == [200, 502, 200]


def test_cut_fault_sends_only_the_first_bytes(emu: EmulatorServer) -> None:
    emu.faults.cut(10, "GET", "/user/whoami")
    with socket.create_connection(("127.0.0.1", emu.port), timeout=5) as sock:
        sock.sendall(f"GET /api/v1/user/whoami HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {emu.api_key}\r\n\r\n"
                     .encode())
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    length = int(re.search(rb"content-length: (\d+)", head, re.IGNORECASE).group(1))
    assert head.startswith(b"HTTP/1.1 200") and len(body) == 10 < length
    with _client(emu) as client:
        emu.faults.cut(5, "GET", "/user/whoami")
        with pytest.raises(httpx.RemoteProtocolError):
            client.get("/user/whoami")


@pytest.mark.parametrize("mode", ["drop", "delay"])
def test_commit_then_timeout_creates_exactly_one_run(emu: EmulatorServer, rl_config: dict, mode: str) -> None:
    emu.faults.commit_then_timeout(mode=mode, delay=3.0)
    with _client(emu) as client:
        client.timeout = httpx.Timeout(1.0)
        with pytest.raises(httpx.RemoteProtocolError if mode == "drop" else httpx.ReadTimeout):
            client.post("/training/runs", json={"config": rl_config})
        listed = client.get("/rft/runs").json()
    summary = emu.state.summary()
    assert summary["run_count"] == 1 == summary["create_attempts"] == listed["total"]


def test_admin_routes_are_never_faulted(admin: httpx.Client, emu: EmulatorServer) -> None:
    emu.faults.status(500, times=None)
    assert admin.get("/state").status_code == 200


# -- admin routes -------------------------------------------------------------------------------------

def test_admin_routes_drive_the_emulator(admin: httpx.Client, api: httpx.Client, emu: EmulatorServer,
                                         rl_config: dict) -> None:
    assert admin.post("/speed", json={"speed": 0}).json() == {"speed": 0.0}
    before = admin.get("/state").json()["now"]
    assert admin.post("/advance", json={"seconds": 100}).json()["now"] == pytest.approx(before + 100)

    added = admin.post("/faults", json={"kind": "status", "status": 503, "method": "GET", "path": "/user/teams",
                                        "times": None}).json()["faults"][0]
    assert api.get("/user/teams").status_code == 503
    assert [f["id"] for f in admin.get("/faults").json()["faults"]] == [added["id"]]
    assert admin.delete(f"/faults/{added['id']}").status_code == 200
    assert api.get("/user/teams").status_code == 200
    assert admin.post("/faults", json={"kind": "explode"}).status_code == 400
    admin.post("/faults", json={"faults": [{"status": 401, "path": "/user/whoami"}, {"status": 402}]})
    assert len(admin.get("/faults").json()["faults"]) == 2
    admin.delete("/faults")
    assert admin.get("/faults").json() == {"faults": []}

    assert admin.post("/scenario", json={"name": "stay_queued", "params": {"runs_ahead": 9}}).status_code == 200
    assert admin.post("/scenario", json={"name": "meltdown"}).status_code == 400
    run_id = create(api, rl_config)
    assert admin.post("/scenario", json={"name": "fail", "run_id": "cnothere"}).status_code == 404
    admin.post("/advance", json={"seconds": 10_000})
    state = admin.get("/state").json()
    assert state["run_count"] == 1 and state["runs"][0]["id"] == run_id
    assert (state["runs"][0]["status"], state["runs"][0]["scenarios"]) == ("QUEUED", ["stay_queued"])
    assert get_run(api, run_id)["runsAhead"] == 9

    assert admin.post("/prepare", json={"submission_supported": True}).json() == \
        {"available": True, "submission_supported": True}
    assert api.post("/training/runs/prepare", json={"mode": "rl", "teamId": None}).json()["submission_supported"]
    admin.post("/prepare", json={"available": False})
    assert api.post("/training/runs/prepare", json={"mode": "rl", "teamId": None}).status_code == 404

    assert admin.post("/reset").json() == {"ok": True}
    assert admin.get("/state").json()["run_count"] == 0
    assert api.get(f"/rft/runs/{run_id}").status_code == 404
    assert admin.post("/speed", content="not json").status_code == 400


def test_admin_routes_refuse_non_loopback_clients(emu: EmulatorServer) -> None:
    transport = httpx.ASGITransport(app=create_app(emu.state, emu.faults), client=("10.1.2.3", 4000))

    async def ask() -> int:
        async with httpx.AsyncClient(transport=transport, base_url="http://emulator") as client:
            return (await client.get("/_emulator/state")).status_code

    import asyncio

    assert asyncio.run(ask()) == 403


def test_unknown_routes_answer_json(api: httpx.Client) -> None:
    missing = api.get("/no/such/route")
    assert missing.status_code == 404 and missing.json() == {"detail": "Not Found"}
    assert api.delete("/user/teams").status_code == 405


def test_the_emulator_imports_nothing_from_tools_nor_from_the_rest_of_skill() -> None:
    package = Path(__file__).resolve().parent.parent / "skill" / "emulator"
    outside = re.compile(r"\s*(from|import)\s+(tools|skill(?!\.emulator\b))(\.|\s|$)|\s*from\s+\.\.")
    offenders = [f"{path.name}: {line.strip()}" for path in sorted(package.glob("*.py"))
                 for line in path.read_text().splitlines() if outside.match(line)]
    assert offenders == []
