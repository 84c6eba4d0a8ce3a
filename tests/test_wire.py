"""Wire models parse the reference §8.2 bodies, tolerate nulls / extras / unknown values;
request-body builders produce exactly the CLI's bodies (§3.4, §3.5, §4)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from tools.platform import wire

RUN = "cmrun0000000000000000000a1"
TEAM = "cteam0000000000000000000001"

# §8.2 example 1
RUNNING = {
    "run": {
        "id": RUN, "name": "qwen3-4b-reverse", "userId": "cmusr0000000000000000000u1", "teamId": TEAM,
        "rftClusterId": None, "primeClusterId": "cmpcl000000000000000000c1", "status": "RUNNING",
        "kind": "DEDICATED_FULL_FT", "loss": "rl", "baseModel": "Qwen/Qwen3-4B",
        "environments": [{"id": "primeintellect/reverse-text"}], "maxSteps": 200, "batchSize": 128,
        "rolloutsPerExample": 8, "seqLen": 4096, "gpuCount": 8, "volumeName": "research",
        "runConfig": {"model": {"name": "Qwen/Qwen3-4B"}, "trainer": {}, "orchestrator": {"batch_size": 128}},
        "wandbEntity": None, "wandbProject": None, "runsAhead": None, "sourceCommit": None,
        "startedAt": "2026-08-20T12:05:00Z", "completedAt": None, "errorMessage": None, "failureAnalysis": None,
        "createdAt": "2026-08-20T12:00:00Z", "updatedAt": "2026-08-20T12:05:00Z",
    }
}
# §8.2 example 2
FAILED = {
    "run": {
        "id": "cmrun0000000000000000000a2", "userId": "cmusr0000000000000000000u1", "status": "FAILED",
        "kind": "DEDICATED_FULL_FT", "errorMessage": "trainer pod OOMKilled",
        "failureAnalysis": {"rootCause": "CUDA OOM in trainer at step 37",
                            "evidence": ["torch.OutOfMemoryError: CUDA out of memory", "exit code 137"],
                            "confidence": 0.86},
        "completedAt": "2026-08-20T13:10:00Z", "createdAt": "2026-08-20T12:00:00Z", "updatedAt": "2026-08-20T13:10:00Z",
    }
}


def test_running_run():
    run = wire.RLRun.model_validate(RUNNING["run"])
    assert (run.id, run.user_id, run.team_id, run.prime_cluster_id, run.rft_cluster_id) == (
        RUN, "cmusr0000000000000000000u1", TEAM, "cmpcl000000000000000000c1", None)
    assert (run.max_steps, run.batch_size, run.rollouts_per_example, run.seq_len, run.gpu_count) == \
        (200, 128, 8, 4096, 8)
    assert run.run_config["orchestrator"]["batch_size"] == 128
    assert run.started_at == datetime(2026, 8, 20, 12, 5, tzinfo=UTC)
    assert run.failure_analysis is None and not run.is_terminal() and not run.is_sft


def test_failed_run_with_analysis():
    run = wire.RLRun.model_validate(FAILED["run"])
    assert run.is_terminal() and run.error_message == "trainer pod OOMKilled"
    fa = run.failure_analysis
    assert fa.root_cause == "CUDA OOM in trainer at step 37" and fa.confidence == 0.86 and len(fa.evidence) == 2
    assert run.environments == [] and run.loss == "rl"


def test_run_page_example_3():
    page = wire.RLRunPage.model_validate({
        "runs": [{"id": RUN, "userId": "u", "status": "QUEUED", "runsAhead": 2,
                  "queueReason": "waiting for H200 capacity",
                  "kind": "DEDICATED_FULL_FT", "environments": [], "createdAt": "2026-08-20T12:00:00Z",
                  "updatedAt": "2026-08-20T12:00:00Z"}],
        "total": 41, "page": 1, "limit": 20, "total_pages": 3})
    assert page.runs[0].runs_ahead == 2 and page.total_pages == 3
    old = wire.RLRunPage.model_validate({"runs": []})
    assert old.total is None  # an old backend without paging


def test_unknown_status_values_survive():
    run = wire.RLRun.model_validate({"id": "r", "status": "ARCHIVING", "newServerField": {"x": 1}})
    assert run.status == "ARCHIVING" and not run.is_terminal()
    assert run.model_extra == {"newServerField": {"x": 1}}
    assert wire.RunStatus.is_terminal("stopped") and wire.RunStatus.is_terminal("PAUSED")
    assert not wire.RunStatus.is_terminal("PAUSING") and not wire.RunStatus.is_terminal(None)
    assert wire.RunStatus.is_known("queued") and not wire.RunStatus.is_known("ARCHIVING")
    ckpt = wire.RLCheckpoint.model_validate({"id": "k", "status": "EVICTED", "step": 1})
    assert ckpt.status == "EVICTED"


def test_nulls_are_tolerated():
    run = wire.RLRun.model_validate({"id": "r", "status": "RUNNING", "environments": None, "failureAnalysis": None,
                                     "createdAt": None, "gpuCount": None})
    assert run.environments == [] and run.created_at is None
    fa = wire.FailureAnalysis.model_validate({"rootCause": None, "evidence": None, "confidence": None})
    assert fa.evidence == []
    created = wire.HostedRunCreated.model_validate({"runId": "r", "tokenValue": "t", "onDemand": None, "isBeta": None})
    assert created.on_demand is False and created.is_beta is False
    usage = wire.RunUsage.model_validate({"run_id": "r", "training": None, "inference": None, "pricing": None})
    assert usage.training.cost_usd == 0.0 and usage.pricing.training_per_mtok is None
    assert wire.RunLogs.model_validate({"logs": None}).logs == ""
    trace = wire.TraceSummary.model_validate({"trace_id": "t", "context": None, "score": None, "model": None})
    assert trace.context == {} and trace.score is None


def test_cli_str_datetimes_parse():
    run = wire.RLRun.model_validate({"id": "r", "status": "RUNNING", "createdAt": "2026-08-20 12:00:00+00:00"})
    assert run.created_at == datetime(2026, 8, 20, 12, tzinfo=UTC)


def test_populate_by_name_and_camel_dump():
    run = wire.RLRun(id="r", status="RUNNING", base_model="Qwen/Qwen3-4B", teacher={"model": "x"})
    dumped = run.model_dump(by_alias=True, exclude_none=True)
    assert dumped["baseModel"] == "Qwen/Qwen3-4B" and dumped["teacher"] == {"model": "x"}
    assert wire.RLRun.model_validate({"id": "r", "status": "S", "teacherConfig": {"a": 1}}).teacher == {"a": 1}


def test_environment_labels():
    run = wire.RLRun.model_validate({"id": "r", "status": "S", "environments": [
        {"slug": "own/env", "name": "n"}, {"name": "named"}, {"taskset": {"id": "ts"}}, {}]})
    assert run.environment_labels() == ["own/env", "named", "ts", "env-3"]


def test_checkpoints_and_env_servers():
    body = {"checkpoints": [{"id": "cmckp0000000000000000000k1", "rftRunId": RUN, "step": 100,
                             "storageUrl": "s3://prime-ckpt/cmrun-a1/step_100", "status": "READY",
                             "sizeBytes": 16106127360,
                             "createdAt": "2026-08-20T14:00:00Z", "uploadedAt": "2026-08-20T14:03:00Z"}]}
    ckpt = wire.RLCheckpoint.model_validate(body["checkpoints"][0])
    assert ckpt.storage_url.startswith("s3://") and ckpt.size_bytes == 16106127360
    env = wire.EnvServerInfo.model_validate({"env_name": None, "env_index": None, "pod_name": "p",
                                             "status": "CrashLoopBackOff"})
    assert env.status == "CrashLoopBackOff" and env.env_name is None


def test_prepare_example_4_and_contract_checks():
    body = {"contract_version": 1, "mode": "rl",
            "runtime": {"repository": "ghcr.io/primeintellect-ai/prime-rl", "digest": "sha256:" + "1" * 64,
                        "image_commit": "2" * 40, "source_commit": None, "schema_commit": "2" * 40},
            "schema_install": {"python": "3.12", "requirements": ["prime-rl-configs @ x"],
                               "constraints": ["pydantic==2.11.7"]},
            "submission_supported": True}
    prep = wire.LocalValidationPreparation.model_validate(body)
    assert prep.contract_problems() == [] and prep.schema_install.constraints == ["pydantic==2.11.7"]
    bad = wire.LocalValidationPreparation.model_validate({
        **body, "contract_version": 2,
        "runtime": {**body["runtime"], "repository": "ghcr.io/other/prime-rl", "source_commit": "3" * 40}})
    problems = " | ".join(bad.contract_problems())
    assert "contract_version" in problems and "repository" in problems and "schema_commit does not match" in problems


def test_created_example_5_hides_the_token():
    created = wire.HostedRunCreated.model_validate(
        {"runId": "cmrun0000000000000000000a3", "tokenValue": "pit_run_fake_token", "onDemand": True,
         "gpuType": "H200_141GB",
         "pricePerGpuHour": 2.5, "estimatedCostPerHour": 20.0, "isBeta": True})
    assert created.price_per_gpu_hour == 2.5 and created.token_value.get_secret_value() == "pit_run_fake_token"
    for text in (repr(created), created.model_dump_json(), json.dumps(created.model_dump(mode="json"))):
        assert "pit_run_fake_token" not in text
    reserved = wire.HostedRunCreated.model_validate({"runId": "r", "tokenValue": "t"})
    assert reserved.on_demand is False and reserved.gpu_type is None


def test_metrics_progress_logs_examples_6_to_8():
    logs = wire.RunLogs.model_validate({"logs": "a\nb"})
    assert logs.lines() == ["a", "b"]
    metrics = wire.RunMetrics.model_validate({"metrics": [{"step": 1, "reward/all/mean": 0.12}]})
    assert metrics.metrics[0]["reward/all/mean"] == 0.12
    progress = wire.RunProgress.model_validate({"latestStep": 12, "stepsWithSamples": [5, 10],
                                                "stepsWithDistributions": [5, 10, 12],
                                                "lastUpdatedAt": "2026-08-20T12:06:00Z"})
    assert progress.steps_with_distributions == [5, 10, 12] and progress.last_updated_at == "2026-08-20T12:06:00Z"
    assert wire.RunProgress.model_validate({}).latest_step is None


def test_catalogue_example_9():
    models = wire.AvailableModels.model_validate(
        {"models": [{"name": "Qwen/Qwen3-4B", "clusters": [{"clusterId": "c", "clusterName": "athens",
                                                            "gpuType": "H200_141GB",
                                                           "cacheSyncedAt": "2026-08-19T10:15:00Z"}]}],
         "onDemand": [{"gpuType": "H200_141GB", "pricePerGpuHour": 2.5, "discountLabel": "20% off through Sept",
                       "availableNow": True, "isBeta": True}],
         "onDemandBetaAccess": True})
    assert models.models[0].clusters[0].gpu_type == "H200_141GB" and models.on_demand[0].available_now
    unknown = wire.AvailableModels.model_validate({"models": []})
    assert unknown.on_demand_beta_access is None and unknown.on_demand == []
    assert wire.GpuTypes.model_validate({"gpuTypes": ["B200_180GB"]}).gpu_types == ["B200_180GB"]


def test_distributions_bins_resolution():
    hist = [{"binStart": 0, "binEnd": 1, "count": 3, "range": "0-1"}]
    assert wire.RunDistribution.model_validate({"chartData": {"histogramData": hist}, "step": 160}).bins == hist
    assert wire.RunDistribution.model_validate({"chart_data": {"histogramData": hist}}).bins == hist
    assert wire.RunDistribution.model_validate({"bins": hist, "chartData": {"histogramData": []}}).bins == hist
    assert wire.RunDistribution.model_validate({}).bins == []


def test_usage_teams_whoami_volumes():
    usage = wire.RunUsage.model_validate({"run_id": "r", "training": {"tokens": 5, "cost_usd": 0.5},
                                          "inference": {"tokens": 1, "input_tokens": 1, "output_tokens": 0,
                                                        "cost_usd": 0.1},
                                          "total_tokens": 6, "total_cost_usd": 0.6, "record_count": 2,
                                          "pricing": {"training_per_mtok": 1.0}})
    assert usage.training.input_tokens == 0 and usage.total_cost_usd == 0.6
    teams = wire.TeamList.model_validate({"data": [{"teamId": TEAM, "name": "R", "slug": "r", "role": "MEMBER",
                                                    "createdAt": "2026-01-01T00:00:00Z"}], "total_count": 1,
                                          "offset": 0})
    assert teams.data[0].team_id == TEAM and teams.total_count == 1
    me = wire.WhoAmI.model_validate({"id": "u", "scope": {"training": None}, "account_limits": None})
    assert me.scope == {"training": None}
    vol = wire.Volume.model_validate({"name": "v", "status": "PENDING_SOMETHING", "clusterId": "c", "pvcName": "p"})
    assert vol.status == "PENDING_SOMETHING" and vol.created_at is None


def test_traces_examples_11_and_12():
    page = wire.TraceListPage.model_validate({"items": [{
        "trace_id": "tr_01", "upload_id": "u", "episode_id": "ep_01", "created_at": "2026-08-20T12:06:00.120Z",
        "ingested_at": "2026-08-20T12:06:09Z", "run_id": RUN, "environment_id": "reverse-text",
        "model": {"provider": "prime", "id": "Qwen/Qwen3-4B"}, "task_id": "task-0007", "agent_name": "solver",
        "score": {"reward": None, "outcome": "done"}, "execution": {"has_error": False, "is_truncated": False},
        "duration_ms": 1830, "total_tokens": 912, "size_bytes": 5120, "context": {"source": "prime-rl",
                                                                                  "run_type": "train"},
        "run_step": 12, "user_id": "u1", "activity": {"model_turns": 3}}], "next_cursor": "c"})
    trace = page.items[0]
    assert trace.score.reward is None and trace.run_step == 12 and trace.model_extra == {"activity": {"model_turns": 3}}
    summary = wire.RunSummary.model_validate({
        "run_id": RUN, "first_trace_created_at": "2026-08-20T12:04:00Z",
                                              "last_trace_created_at": "2026-08-20T12:06:00Z",
        "last_trace_ingested_at": "2026-08-20T12:06:09Z", "trace_count": 2048, "episode_count": 256, "avg_reward": 0.41,
        "step_min": 1, "step_max": 12, "step_count": 12, "has_error": False, "first_user_id": "u",
        "environment_ids": ["reverse-text"], "model_ids": ["Qwen/Qwen3-4B"], "context": {"source": "prime-rl",
                                                                                         "run_type": "train"}})
    assert summary.trace_count == 2048 and summary.context["run_type"] == "train"
    steps = wire.RunStepList.model_validate({"step_min": 1, "step_max": 2, "step_count": 2, "items": [
        {"step": 1, "trace_count": 128, "episode_count": 16, "avg_reward": 0.12},
        {"step": 2, "trace_count": 128, "episode_count": 16, "avg_reward": None}]})
    assert [s.avg_reward for s in steps.items] == [0.12, None]
    assert wire.RunStepList.model_validate({"step_min": None, "step_max": None, "step_count": 0,
                                            "items": []}).items == []


def test_episodes_and_search():
    detail = wire.EpisodeDetail.model_validate({
        "episode_id": "ep", "upload_id": "u", "schema_version": 1, "created_at": "2026-08-20T12:00:00Z",
        "ingested_at": "2026-08-20T12:00:01Z", "run_id": None, "environment_id": None, "outcome": None,
        "has_error": True, "error": {"type": "HookError", "message": "boom"},
        "traces": {"trace_count": 0, "total_tokens": 0, "total_duration_ms": 0, "any_trace_error": False,
                   "agent_names": []}})
    assert detail.error.type == "HookError" and detail.traces.trace_count == 0
    search = wire.TraceSearchPage.model_validate({"items": [{"trace_id": "t", "upload_id": "u", "generation": 1,
                                                             "episode_id": None, "node_idx": 0, "role": "user",
                                                             "field": "content", "representation": "text",
                                                             "match_start": 0,
                                                             "match_end": 3, "excerpt": "abc", "excerpt_start": 0}],
                                                  "next_cursor": None})
    assert search.coverage is None and search.items[0].match_end == 3


# -- request bodies -------------------------------------------------------------------------


def test_create_body_rl_matches_the_observed_example_exactly():
    body = wire.build_create_body(
        {"name": "demo", "model": {"name": "Qwen/Qwen3-4B"}, "trainer": {}, "orchestrator": {}},
        name="demo", team_id=TEAM, image_tag="v0.5.0", wandb_api_key="wk-123", hf_token="hf-1",
        gpu_type="H200_141GB", volume="research", mode="rl")
    expected = {"config": {"name": "demo", "model": {"name": "Qwen/Qwen3-4B"}, "trainer": {}, "orchestrator": {}},
                "name": "demo", "teamId": TEAM, "imageTag": "v0.5.0", "wandbApiKey": "wk-123", "hfToken": "hf-1",
                "gpuType": "H200_141GB", "volume": "research"}
    assert json.dumps(body) == json.dumps(expected)  # same keys, same order


def test_create_body_sft_and_optional_keys():
    assert wire.build_create_body({"data": {}}, mode="sft", name="s") == {"config": {"data": {}}, "mode": "sft",
                                                                          "name": "s"}
    with_ref = wire.build_create_body({"data": {}}, mode="sft", name="s", source_ref="main")
    assert list(with_ref) == ["config", "mode", "name", "sourceRef"]
    minimal = wire.build_create_body({}, team_id=None, name="", image_tag="")
    assert minimal == {"config": {}}  # no teamId without a team; empty strings left out
    resumed = wire.build_create_body({}, resume_from="", normalized_config={"contract_version": 4})
    assert resumed == {"config": {}, "resumeFrom": "", "normalizedConfig": {"contract_version": 4}}
    with pytest.raises(ValueError):
        wire.build_create_body({}, mode="dpo")


def test_create_body_model_hides_secrets_and_matches_the_builder():
    model = wire.CreateRunBody(config={"a": 1}, team_id=TEAM, wandb_api_key="fake-wandb-key", hf_token="fake-hf-token")
    assert "fake-wandb-key" not in repr(model) and "fake-hf-token" not in model.model_dump_json()
    assert model.to_wire() == wire.build_create_body({"a": 1}, team_id=TEAM, wandb_api_key="fake-wandb-key",
                                                     hf_token="fake-hf-token")
    with pytest.raises(ValueError):
        wire.CreateRunBody(config={}, unknown=1)


def test_prepare_resume_volume_bodies():
    assert wire.build_prepare_body("rl", None) == {"mode": "rl", "teamId": None}
    assert wire.build_prepare_body("sft", TEAM, image_tag="v1", source_ref="main") == {
        "mode": "sft", "teamId": TEAM, "imageTag": "v1", "sourceRef": "main"}
    with pytest.raises(ValueError):
        wire.build_prepare_body("", None)
    assert wire.build_resume_body(gpu_type="H200_141GB", hf_token="h") == {"gpuType": "H200_141GB", "hfToken": "h"}
    assert wire.build_resume_body() == {}
    assert wire.build_volume_body("v", "5Ti") == {"name": "v", "size": "5Ti", "warm": True}
    assert wire.build_volume_body("v", "1Ti", team_id=TEAM, cluster="athens", warm=False) == {
        "name": "v", "size": "1Ti", "warm": False, "teamId": TEAM, "cluster": "athens"}
