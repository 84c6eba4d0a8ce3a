"""Regenerate the contract cassettes from the real ``prime`` CLI 0.18.0 (provenance tool, not a test).

Each scenario runs one real ``prime`` command against a loopback stub that logs every
request (method, path, raw query, headers, body) and answers with the response shapes of
reference/prime-api.md §8.2. The logged *requests* are what the CLI really sent; the
*responses* are the documented shapes. Each scenario becomes ``tests/cassettes/<name>.yaml``
(host rewritten to https://api.primeintellect.ai, the Authorization header left out;
the header comment records what the CLI sent). ``tests/test_client_contract.py`` replays
them against :mod:`tools.platform.client` with ``record_mode="none"``.

Usage (needs the prime 0.18.0 CLI; no network beyond loopback)::

    PRIME_CLI=/path/to/bin/prime uv run python tests/cassettes/capture_cli.py [scenario ...]

Fake values only: API key ``fake-prime-api-key``, team ``cteam0000000000000000000001``,
W&B key ``fake-wandb-key``, HF token ``fake-hf-token``, run token ``pit_run_fake_token``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
HOST = "https://api.primeintellect.ai"
API_KEY = "fake-prime-api-key"
TEAM = "cteam0000000000000000000001"
RUN = "cmrun0000000000000000000a1"
USER = "cmusr0000000000000000000u1"
KEEP_HEADERS = ("content-type", "user-agent", "x-prime-team-id", "accept")

# ---- response bodies (reference §8.2, fake ids) -------------------------------------------
RUN_RUNNING = {
    "id": RUN, "name": "qwen3-4b-reverse", "userId": USER, "teamId": TEAM, "rftClusterId": None,
    "primeClusterId": "cmpcl000000000000000000c1", "status": "RUNNING", "kind": "DEDICATED_FULL_FT",
    "loss": "rl", "baseModel": "Qwen/Qwen3-4B", "environments": [{"id": "primeintellect/reverse-text"}],
    "maxSteps": 200, "batchSize": 128, "rolloutsPerExample": 8, "seqLen": 4096, "gpuCount": 8,
    "volumeName": "research",
    "runConfig": {"model": {"name": "Qwen/Qwen3-4B"}, "trainer": {}, "orchestrator": {"batch_size": 128}},
    "wandbEntity": None, "wandbProject": None, "runsAhead": None, "sourceCommit": None,
    "startedAt": "2026-08-20T12:05:00Z", "completedAt": None, "errorMessage": None, "failureAnalysis": None,
    "createdAt": "2026-08-20T12:00:00Z", "updatedAt": "2026-08-20T12:05:00Z",
}
RUN_SHARED = {**RUN_RUNNING, "kind": "SHARED_RFT_HOSTED", "rftClusterId": "cmrcl000000000000000000r1",
              "primeClusterId": None}
RUN_STOPPED = {**RUN_RUNNING, "status": "STOPPED", "completedAt": "2026-08-20T13:00:00Z",
               "updatedAt": "2026-08-20T13:00:00Z"}
RUN_PAGE = {
    "runs": [{"id": RUN, "userId": USER, "status": "QUEUED", "runsAhead": 2, "queueReason": "waiting for H200 capacity",
              "kind": "DEDICATED_FULL_FT", "environments": [], "createdAt": "2026-08-20T12:00:00Z",
              "updatedAt": "2026-08-20T12:00:00Z"}],
    "total": 41, "page": 1, "limit": 20, "total_pages": 3,
}
PREPARE = {
    "contract_version": 1, "mode": "rl",
    "runtime": {"repository": "ghcr.io/primeintellect-ai/prime-rl", "digest": "sha256:" + "1" * 64,
                "image_commit": "2" * 40, "source_commit": None, "schema_commit": "2" * 40},
    "schema_install": {"python": "3.12",
                       "requirements": ["prime-rl-configs @ https://github.com/PrimeIntellect-ai/prime-rl/archive/"
                                        + "2" * 40 + ".tar.gz#subdirectory=packages/prime-rl-configs"],
                       "constraints": ["pydantic==2.11.7"]},
    "submission_supported": False,
}
CREATED = {"runId": "cmrun0000000000000000000a3", "tokenValue": "pit_run_fake_token", "onDemand": True,
           "gpuType": "H200_141GB", "pricePerGpuHour": 2.5, "estimatedCostPerHour": 20.0, "isBeta": True}
LOGS = {"logs": "{\"timestamp\":\"2026-08-20T12:06:01.120Z\",\"level\":\"INFO\",\"message\":\"Step 12 | reward 0.41\","
                "\"tag\":\"orchestrator\"}\n"
                "{\"timestamp\":\"2026-08-20T12:06:02Z\",\"level\":\"info\",\"type\":\"progress\",\"message\":\"42%\"}\n"
                "[rank0]: {\"timestamp\":\"2026-08-20T12:06:03Z\",\"level\":\"WARNING\",\"message\":\"slow batch\"}\n"
                "plain text line"}
METRICS = {"metrics": [{"step": 1, "reward/all/mean": 0.12, "loss": 0.83, "timestamp": "2026-08-20T12:04:00Z"},
                       {"step": 2, "reward/all/mean": 0.19, "loss": 0.77, "timestamp": "2026-08-20T12:05:00Z"}]}
PROGRESS = {"latestStep": 12, "stepsWithSamples": [5, 10], "stepsWithDistributions": [5, 10, 12],
            "lastUpdatedAt": "2026-08-20T12:06:00Z"}
ENV_SERVERS = {"env_servers": [{"env_name": "primeintellect/reverse-text", "env_index": 0,
                                "pod_name": "rft-cmrun-a1-env-reverse-text-0", "status": "Running"}]}
MODELS = {"models": [{"name": "Qwen/Qwen3-4B", "clusters": [{"clusterId": "cmpcl000000000000000000c1",
                                                             "clusterName": "athens",
                                                            "gpuType": "H200_141GB",
                                                             "cacheSyncedAt": "2026-08-19T10:15:00Z"}]}],
          "onDemand": [{"gpuType": "H200_141GB", "pricePerGpuHour": 2.5, "discountLabel": "20% off through Sept",
                        "availableNow": True, "isBeta": True}],
          "onDemandBetaAccess": True}
GPUS = {"gpuTypes": ["B200_180GB", "H200_141GB"]}
CHECKPOINTS = {"checkpoints": [{"id": "cmckp0000000000000000000k1", "rftRunId": RUN, "step": 100,
                                "storageUrl": "s3://prime-ckpt/cmrun-a1/step_100", "status": "READY",
                                "sizeBytes": 16106127360,
                                "createdAt": "2026-08-20T14:00:00Z", "uploadedAt": "2026-08-20T14:03:00Z"}]}
PAUSED = {"runId": RUN, "status": "PAUSING"}
SAMPLES = {"run_id": RUN, "samples": [{"step": 5, "example_id": 7, "reward": 0.75, "prompt": [{"role": "user",
                                                                                               "content": "abc"}],
                                       "completion": [{"role": "assistant", "content": "cba"}]}],
           "total": 1, "page": 1, "limit": 100, "total_pages": 1}
DISTRIBUTIONS = {"chartData": {"histogramData": [{"binStart": 0.0, "binEnd": 0.5, "count": 40, "range": "0.0-0.5"},
                                                 {"binStart": 0.5, "binEnd": 1.0, "count": 88, "range": "0.5-1.0"}]},
                 "step": 160}
USAGE = {"run_id": RUN, "run_name": "qwen3-4b-reverse", "base_model": "Qwen/Qwen3-4B", "status": "RUNNING",
         "training": {"tokens": 1200000, "input_tokens": 0, "output_tokens": 0, "cost_usd": 1.2},
         "inference": {"tokens": 3400000, "input_tokens": 2400000, "output_tokens": 1000000, "cost_usd": 2.05},
         "total_tokens": 4600000, "total_cost_usd": 3.25, "record_count": 17,
         "pricing": {"training_per_mtok": 1.0, "inference_input_per_mtok": 0.5, "inference_output_per_mtok": 0.85}}
TEAMS = {"data": [{"teamId": TEAM, "name": "Research", "slug": "research", "role": "ADMIN",
                   "createdAt": "2026-01-02T03:04:05Z"}], "total_count": 1}
VOLUMES = {"volumes": [{"name": "research", "size": "5Ti", "status": "RUNNING",
                        "clusterId": "cmpcl000000000000000000c1",
                        "cluster": "athens", "pvcName": "vol-research", "createdBy": USER, "createdByName": "Ada",
                        "createdByEmail": "ada@example.invalid", "createdAt": "2026-08-01T00:00:00Z"}]}
WHOAMI = {"data": {"id": USER, "email": "ada@example.invalid", "name": "Ada", "slug": "ada",
                   "scope": {"training": {"read": True, "write": True}}, "account_limits": {}, "key_limits": None}}
TRACE = {"trace_id": "tr_01", "upload_id": "3f0c" + "0" * 58 + "aa", "episode_id": "ep_01",
         "created_at": "2026-08-20T12:06:00.120Z", "ingested_at": "2026-08-20T12:06:09Z", "run_id": RUN,
         "environment_id": "reverse-text", "model": {"provider": "prime", "id": "Qwen/Qwen3-4B"},
         "task_id": "task-0007",
         "agent_name": "solver", "score": {"reward": 0.75, "outcome": "done"},
         "execution": {"has_error": False, "is_truncated": False}, "duration_ms": 1830, "total_tokens": 912,
         "size_bytes": 5120, "context": {"source": "prime-rl", "run_type": "train"}, "run_step": 12, "user_id": USER}
TRACE_PAGE = {"items": [TRACE], "next_cursor": "eyJrIjoiMjAyNi0wOC0yMFQxMjowNjowMCJ9"}
TRACE_LAST_PAGE = {"items": [TRACE], "next_cursor": None}
RAW_TRACE = b'{"version":4,"id":"tr_01","nodes":[{"role":"user","content":"abc"}]}'
RUN_SUMMARY = {"run_id": RUN, "first_trace_created_at": "2026-08-20T12:04:00Z",
               "last_trace_created_at": "2026-08-20T12:06:00Z",
               "last_trace_ingested_at": "2026-08-20T12:06:09Z", "trace_count": 2048, "episode_count": 256,
               "avg_reward": 0.41,
               "step_min": 1, "step_max": 12, "step_count": 12, "has_error": False, "first_user_id": USER,
               "environment_ids": ["reverse-text"], "model_ids": ["Qwen/Qwen3-4B"],
               "context": {"source": "prime-rl", "run_type": "train"}}
RUN_STEPS = {"step_min": 1, "step_max": 2, "step_count": 2,
             "items": [{"step": 1, "trace_count": 128, "episode_count": 16, "avg_reward": 0.12},
                       {"step": 2, "trace_count": 128, "episode_count": 16, "avg_reward": None}]}
EPISODE = {"episode_id": "ep_01", "upload_id": "3f0c" + "0" * 58 + "aa", "schema_version": 1,
           "created_at": "2026-08-20T12:06:00Z", "ingested_at": "2026-08-20T12:06:09Z", "run_id": RUN,
           "environment_id": "reverse-text", "outcome": "done", "has_error": False, "error": {"type": None,
                                                                                              "message": None}}
EPISODE_DETAIL = {**EPISODE, "traces": {"trace_count": 8, "total_tokens": 7296, "total_duration_ms": 14640,
                                        "any_trace_error": False, "agent_names": ["solver"]}}
SEARCH_PAGE = {"items": [{"trace_id": "tr_01", "upload_id": "3f0c" + "0" * 58 + "aa", "generation": 1,
                          "episode_id": "ep_01",
                          "node_idx": 3, "role": "assistant", "field": "content", "representation": "text",
                          "match_start": 10, "match_end": 19, "excerpt": "...Traceback (most recent call last)",
                          "excerpt_start": 7}],
               "next_cursor": None,
               "coverage": {"examined_traces": 2048, "unindexed_trace_ids": [], "partial_index": False}}

Response = tuple[int, dict[str, str], Any]


def ok(body: Any) -> Response:
    return (200, {"Content-Type": "application/json"}, body)


def err(status: int, body: Any, **headers: str) -> Response:
    return (status, {"Content-Type": "application/json", **headers}, body)


@dataclass
class Scenario:
    name: str
    argv: list[str]
    routes: list[tuple[str, str, list[Response]]]
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    traces: bool = False
    note: str = ""
    #: extra (response) interactions appended after a given captured request index,
    #: repeating that request: models a retry our client makes and the CLI does not.
    repeat: dict[int, list[Response]] = field(default_factory=dict)


RL_TOML = """name = "demo"
image_tag = "v0.5.0"
gpu_type = "H200_141GB"
volume = "research"
env_files = ["secrets.env"]

[model]
name = "Qwen/Qwen3-4B"

[trainer]

[orchestrator]
"""
SFT_TOML = """name = "s"

[model]
name = "Qwen/Qwen3-0.6B"

[data]
name = "willcb/R1-reverse-wikipedia-paragraphs-v1-1000"
seq_len = 4096
"""
R = f"/api/v1/rft/runs/{RUN}"

SCENARIOS = [
    Scenario(
        "dispatch_rl",
        ["train", "run", "{dir}/rl.toml", "-y", "-o", "json", "-e", "HF_TOKEN=fake-hf-token"],
        [("POST", "/api/v1/training/runs/prepare", [ok(PREPARE)]),
         ("GET", "/api/v1/training/volumes", [ok(VOLUMES)]),
         ("POST", "/api/v1/training/runs", [ok(CREATED)])],
        env={"PRIME_TEAM_ID": TEAM},
        files={"rl.toml": RL_TOML, "secrets.env": "WANDB_API_KEY=fake-wandb-key\n"},
        note="RL dispatch, team set, HF token via -e, W&B key via env_files, gpu type, volume, image tag (§3.5).",
    ),
    Scenario(
        "dispatch_sft",
        ["train", "run", "{dir}/sft.toml", "-y", "-o", "json"],
        [("POST", "/api/v1/training/runs/prepare", [ok({**PREPARE, "mode": "sft", "submission_supported": True})]),
         ("POST", "/api/v1/training/runs", [ok({"runId": "cmrun0000000000000000000a4",
                                                "tokenValue": "pit_run_fake_token"})])],
        files={"sft.toml": SFT_TOML},
        note="SFT dispatch, no team (prepare teamId null; create without teamId); no uv on PATH so no "
             "normalizedConfig.",
    ),
    Scenario(
        "dispatch_sft_ref",
        ["train", "run", "{dir}/sft.toml", "-y", "-o", "json", "--ref", "main"],
        [("POST", "/api/v1/training/runs/prepare", [err(404, {"detail": "Not Found"})]),
         ("POST", "/api/v1/training/runs", [ok({"runId": "cmrun0000000000000000000a5",
                                                "tokenValue": "pit_run_fake_token"})])],
        files={"sft.toml": SFT_TOML},
        note="SFT dispatch with --ref main: sourceRef in prepare and create; prepare 404 = old platform, skipped.",
    ),
    Scenario(
        "dispatch_422",
        ["train", "run", "{dir}/sft.toml", "-y", "-o", "json"],
        [("POST", "/api/v1/training/runs/prepare", [err(405, {"detail": "Method Not Allowed"})]),
         ("POST", "/api/v1/training/runs", [err(422, {"detail": [{"loc": ["body", "config", "trainer", "lr"],
                                                                   "msg": "Input should be a valid number",
                                                                   "type": "float_parsing"}]})])],
        files={"sft.toml": SFT_TOML},
        note="A create rejected with a FastAPI 422 detail list (§8.2 example 13); prepare 405 = old platform.",
    ),
    Scenario("list_runs", ["train", "list", "-t", TEAM, "-n", "20", "-p", "1", "-o", "json"],
             [("GET", "/api/v1/rft/runs", [ok(RUN_PAGE)])]),
    Scenario("list_runs_429", ["train", "list", "-n", "20", "-p", "1", "-o", "json"],
             [("GET", "/api/v1/rft/runs", [err(429, {"detail": "Too Many Requests"}, **{"Retry-After": "7"})])],
             repeat={0: [ok(RUN_PAGE)]},
             note="429 with Retry-After: 7. The CLI does not retry; the second interaction repeats the same "
                  "request (our client's retry) with the page of §8.2 example 3."),
    Scenario("list_runs_429_date", ["train", "list", "-n", "20", "-p", "1", "-o", "json"],
             [("GET", "/api/v1/rft/runs", [err(429, {"detail": "Too Many Requests"},
                                                **{"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})])],
             note="429 with an HTTP-date Retry-After in the past (= retry now)."),
    Scenario("get_run", ["train", "get", RUN, "-o", "json"], [("GET", R, [ok({"run": RUN_RUNNING})])]),
    Scenario("get_run_401", ["train", "get", RUN, "-o", "json"], [("GET", R,
                                                                   [err(401, {"detail": "Invalid API key"})])]),
    Scenario("get_run_404", ["train", "get", "cmrun-missing", "-o", "json"],
             [("GET", "/api/v1/rft/runs/cmrun-missing", [err(404, {"detail": "Run not found"})])]),
    Scenario("stop_run", ["train", "stop", RUN, "-f"], [("PUT", R + "/stop", [ok({"run": RUN_STOPPED})])]),
    Scenario("pause_run", ["train", "pause", RUN, "-f"], [("POST", f"/api/v1/training/runs/{RUN}/pause",
                                                           [ok(PAUSED)])]),
    Scenario("resume_run",
             ["train", "resume", RUN, "-e", "WANDB_API_KEY=fake-wandb-key", "--gpu-type", "H200_141GB", "-y", "-o",
              "json"],
             [("POST", f"/api/v1/training/runs/{RUN}/resume", [ok(CREATED)])]),
    Scenario("logs_default", ["train", "logs", RUN], [("GET", R + "/logs", [ok(LOGS)])]),
    Scenario("logs_filtered",
             ["train", "logs", RUN, "-n", "200", "--search", "Step \\d", "--regex", "--level", "error", "--since",
              "2h"],
             [("GET", R + "/logs", [ok(LOGS)])]),
    Scenario("logs_all_trainer", ["train", "logs", RUN, "--all", "-c", "trainer"], [("GET", R + "/logs", [ok(LOGS)])]),
    Scenario("logs_env_component", ["train", "logs", RUN, "--env", "reverse-text"], [("GET", R + "/logs", [ok(LOGS)])]),
    Scenario("env_server_logs", ["train", "logs", RUN, "--env", "reverse-text/1"],
             [("GET", R, [ok({"run": RUN_SHARED})]), ("GET", R + "/env-server-logs", [ok(LOGS)])],
             note="A non-dedicated run: the CLI probes the run kind, then reads /env-server-logs."),
    Scenario("env_servers", ["train", "components", RUN],
             [("GET", R, [ok({"run": RUN_RUNNING})]), ("GET", R + "/env-servers", [ok(ENV_SERVERS)])]),
    Scenario("metrics", ["train", "metrics", RUN, "--min-step", "1", "-n", "2"], [("GET", R + "/metrics",
                                                                                   [ok(METRICS)])]),
    Scenario("progress", ["train", "progress", RUN], [("GET", R + "/progress", [ok(PROGRESS)])]),
    Scenario("checkpoints", ["train", "checkpoints", RUN, "-s", "READY", "-o", "json"],
             [("GET", R + "/checkpoints", [ok(CHECKPOINTS)])]),
    Scenario("samples", ["train", "rollouts", RUN, "-s", "5", "-p", "1", "-n", "100"], [("GET", R + "/samples",
                                                                                         [ok(SAMPLES)])]),
    Scenario("distributions", ["train", "distributions", RUN, "-t", "rewards", "-s", "160"],
             [("GET", R + "/distributions", [ok(DISTRIBUTIONS)])]),
    Scenario("usage", ["train", "usage", RUN, "-o", "json"], [("GET", f"/api/v1/billing/runs/{RUN}/usage",
                                                               [ok(USAGE)])]),
    Scenario("models", ["train", "models"], [("GET", "/api/v1/training/available-fft-models", [ok(MODELS)])],
             env={"PRIME_TEAM_ID": TEAM}),
    Scenario("gpus", ["train", "gpus", "-o", "json"], [("GET", "/api/v1/training/available-gpu-types", [ok(GPUS)])],
             env={"PRIME_TEAM_ID": TEAM}),
    Scenario("teams", ["teams", "list", "--offset", "0", "--limit", "100", "-o", "json"],
             [("GET", "/api/v1/user/teams", [ok(TEAMS)])]),
    Scenario("volumes", ["volumes", "list", "-o", "json"], [("GET", "/api/v1/training/volumes", [ok(VOLUMES)])],
             env={"PRIME_TEAM_ID": TEAM}),
    Scenario("whoami", ["whoami"], [("GET", "/api/v1/user/whoami", [ok(WHOAMI)])], env={"PRIME_TEAM_ID": TEAM}),
    # ---- traces host --------------------------------------------------------------------
    Scenario("traces_list", ["traces", "list", "--run-id", RUN, "--limit", "100", "-o", "json"],
             [("GET", "/api/v1/traces", [ok(TRACE_PAGE)])], env={"PRIME_TEAM_ID": TEAM}, traces=True),
    Scenario("traces_list_filters",
             ["traces", "list", "--run-id", RUN, "--env", "reverse-text", "-c", "source=hosted_eval", "--no-has-error",
              "--reward-min", "0.5", "--limit", "50", "--cursor", "c1", "-o", "json"],
             [("GET", "/api/v1/traces", [ok(TRACE_LAST_PAGE)])], traces=True,
             note="Query encoding: context.* keys, boolean false, float, cursor; no team (no X-Prime-Team-ID)."),
    Scenario("traces_list_pages", ["traces", "list", "--run-id", RUN, "--has-error", "--limit", "20", "--page", "2",
                                   "-o", "json"],
             [("GET", "/api/v1/traces", [ok({**TRACE_PAGE, "next_cursor": "c1"}), ok(TRACE_LAST_PAGE)])], traces=True,
             note="--page 2 walks the cursor: two GETs, the second with cursor=c1; boolean true."),
    Scenario("traces_get", ["traces", "get", "tr_01", "-o", "json"], [("GET", "/api/v1/traces/tr_01", [ok(TRACE)])],
             env={"PRIME_TEAM_ID": TEAM}, traces=True),
    Scenario("traces_raw", ["traces", "get", "tr_01", "--raw", "--dest", "{dir}/tr_01.json", "-o", "json"],
             [("GET", "/api/v1/traces/tr_01", [(200, {"Content-Type": "application/json"}, RAW_TRACE)])],
             env={"PRIME_TEAM_ID": TEAM}, traces=True),
    Scenario("traces_run", ["traces", "get", RUN, "--runs", "-o", "json"],
             [("GET", f"/api/v1/runs/{RUN}/steps", [ok(RUN_STEPS)]), ("GET", f"/api/v1/runs/{RUN}", [ok(RUN_SUMMARY)])],
             env={"PRIME_TEAM_ID": TEAM}, traces=True),
    Scenario("traces_run_not_found", ["traces", "get", "cmrun-missing", "--runs", "-o", "json"],
             [("GET", "/api/v1/runs/cmrun-missing",
               [err(404, {"error": {"code": "run_not_found", "message": "no traces for run cmrun-missing"}})])],
             env={"PRIME_TEAM_ID": TEAM}, traces=True),
    Scenario("traces_episodes", ["traces", "list", "--episodes", "--run-id", RUN, "--run-step", "12", "-o", "json"],
             [("GET", "/api/v1/episodes", [ok({"items": [EPISODE], "next_cursor": None})])], traces=True),
    Scenario("traces_episode_get", ["traces", "get", "ep_01", "--episodes", "-o", "json"],
             [("GET", "/api/v1/episodes/ep_01", [ok(EPISODE_DETAIL)])], traces=True),
    Scenario("traces_runs_list", ["traces", "list", "--runs", "--run-type", "eval", "-o", "json"],
             [("GET", "/api/v1/runs", [ok({"items": [{**RUN_SUMMARY, "context": {"source": "hosted_eval",
                                                                                 "run_type": "eval"}}],
                                           "next_cursor": None})])], traces=True),
    Scenario("traces_search", ["traces", "search", "Traceback", "--run-id", RUN, "--has-error", "-o", "json"],
             [("GET", f"/api/v1/runs/{RUN}/search", [ok(SEARCH_PAGE)])], traces=True),
]


class Stub(ThreadingHTTPServer):
    scenario: Scenario
    log: list[dict[str, Any]]
    used: dict[int, int]


class Handler(BaseHTTPRequestHandler):
    server: Stub

    def log_message(self, *args: Any) -> None:  # silence
        pass

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        path, _, query = self.path.partition("?")
        self.server.log.append({"method": self.command, "path": path, "query": query,
                                "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})
        response: Response = err(404, {"detail": "Not Found"})
        for index, (method, route, responses) in enumerate(self.server.scenario.routes):
            if method == self.command and route == path:
                used = self.server.used.get(index, 0)
                response = responses[min(used, len(responses) - 1)]
                self.server.used[index] = used + 1
                break
        else:
            print(f"  unexpected request: {self.command} {self.path}", file=sys.stderr)
        self.server.log[-1]["response"] = response
        status, headers, payload = response
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle


def _interaction(entry: dict[str, Any], response: Response) -> dict[str, Any]:
    status, headers, payload = response
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    uri = HOST + entry["path"] + (f"?{entry['query']}" if entry["query"] else "")
    request_headers = {k.title() if k != "x-prime-team-id" else "X-Prime-Team-ID": [v]
                       for k, v in entry["headers"].items() if k in KEEP_HEADERS}
    reason = {200: "OK", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed",
              422: "Unprocessable Entity", 429: "Too Many Requests"}.get(status, "")
    return {
        "request": {"method": entry["method"], "uri": uri, "headers": request_headers,
                    "body": entry["body"].decode()},
        "response": {"status": {"code": status, "message": reason},
                     "headers": {k: [v] for k, v in headers.items()},
                     "body": {"string": data.decode()}},
    }


def capture(server: Stub, cli: str, scenario: Scenario) -> None:
    server.scenario, server.log, server.used = scenario, [], {}
    base = f"http://127.0.0.1:{server.server_address[1]}"
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        work = Path(tmp) / "work"
        home.mkdir()
        work.mkdir()
        for name, text in scenario.files.items():
            (work / name).write_text(text)
        env = {
            "HOME": str(home), "PATH": str(Path(cli).parent) + ":/usr/bin:/bin",  # no uv: no local compile
            "PRIME_API_KEY": API_KEY, "PRIME_API_BASE_URL": base, "PRIME_TRACES_URL": base,
            "PRIME_DISABLE_VERSION_CHECK": "1", "NO_COLOR": "1", "COLUMNS": "200", **scenario.env,
        }
        argv = [cli, "--plain", *[a.replace("{dir}", str(work)) for a in scenario.argv]]
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, cwd=work)
    shown = " ".join(a if "{dir}" not in a else a.replace("{dir}/", "") for a in scenario.argv)
    env_shown = " ".join(f"{k}={v}" for k, v in scenario.env.items())
    interactions = []
    for index, entry in enumerate(server.log):
        interactions.append(_interaction(entry, entry["response"]))
        for extra in scenario.repeat.get(index, []):
            interactions.append(_interaction(entry, extra))
    auth = sorted({e["headers"].get("authorization", "<none>").replace(API_KEY, "<PRIME_API_KEY>") for e in server.log})
    header = [
        f"# Captured from the real prime CLI 0.18.0 by tests/cassettes/capture_cli.py: `prime {shown}`",
        f"#   env: PRIME_API_KEY=<fake> {env_shown}".rstrip(),
        f"#   exit code {proc.returncode}; Authorization sent: {', '.join(auth)} (left out below).",
        "# Requests are exactly what the CLI sent (host rewritten); responses are reference §8.2 shapes.",
    ]
    if scenario.note:
        header.append(f"# {scenario.note}")
    if scenario.repeat:
        header.append("# Interactions marked by `repeat` duplicate a captured request (a retry our client makes).")
    text = "\n".join(header) + "\n" + yaml.safe_dump({"interactions": interactions, "version": 1},
                                                     sort_keys=False, allow_unicode=True, width=120)
    (HERE / f"{scenario.name}.yaml").write_text(text)
    print(f"{scenario.name}: {len(server.log)} request(s), exit {proc.returncode}")
    if proc.returncode not in (0,) and "401" not in scenario.name and "404" not in scenario.name:
        print(re.sub(r"\s+", " ", proc.stdout[-300:] + proc.stderr[-300:]), file=sys.stderr)


def main(names: list[str]) -> None:
    cli = os.environ.get("PRIME_CLI") or "prime"
    server = Stub(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        for scenario in SCENARIOS:
            if not names or scenario.name in names:
                capture(server, cli, scenario)
    finally:
        server.shutdown()


if __name__ == "__main__":
    main(sys.argv[1:])
