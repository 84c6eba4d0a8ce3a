"""The end-of-run report (mf_run_report), spend so far against the plan, and what the run tools say
about a launch: the secret names a run got (get_run, list_launches), each run's latest step
(list_runs), the run-name suffix explained once in the plan. Real HTTP against the emulator, runs
launched through the tools with a host approver standing in for the person."""

from __future__ import annotations

import collections
import json
import re
import shutil

import pytest
from _helpers import EXAMPLE, call, mf, ok, pasted

from skill.emulator import TEAM_RESEARCH_ID
from tools.core import Context
from tools.errors import call as tool_call
from tools.monitor import PNG_SIGNATURE

QUEUE, STARTUP, STEP, FINALIZE = 60.0, 90.0, 30.0, 10.0


@pytest.fixture
def ctx(frozen_ctx, tmp_path, monkeypatch):
    frozen_ctx.approver = lambda request: True  # the host asked the person, who said yes
    frozen_ctx.env = {**frozen_ctx.env, "WANDB_API_KEY": "wandb_v1_FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE00"}
    frozen_ctx.cwd = tmp_path
    return frozen_ctx


@pytest.fixture
def launched(ctx, tmp_path):
    """Plan and dispatch the reverse-text example through the tools; returns (plan, run id)."""

    def launch(**plan_arguments):
        config = tmp_path / f"rl-{len(list(tmp_path.glob('rl-*.toml')))}.toml"
        shutil.copy(EXAMPLE, config)
        plan = ok(call(ctx, "mf_plan_run", config_path=str(config), **{"team": "personal", **plan_arguments}))
        return plan, ok(call(ctx, "mf_dispatch_run", plan_id=plan.plan_id)).run_id

    return launch


def test_the_report_of_a_finished_run_has_every_part_a_person_asks_for(ctx, emulator, launched):
    plan, run_id = launched(secrets=["WANDB_API_KEY"])
    emulator.state.advance(QUEUE + STARTUP + 20 * STEP + FINALIZE + 60)
    ok(call(ctx, "mf_download_traces", run_id=run_id, dest="traces"))
    report = ok(call(ctx, "mf_run_report", run_id=run_id, traces_dir="traces"))
    text = report.markdown
    assert (report.status, report.terminal, report.traces_complete) == ("COMPLETED", True, True)
    assert f"## Run {run_id} ({plan.run_name})" in text and "Owner: personal account" in text
    assert "Outcome: completed (20 of 20 steps)" in text
    assert "\n- Cost: $" in text and "so far" not in text  # the run has ended: its cost, not a cost so far
    assert f"the plan's estimate of ${plan.cost.usd_low:,.2f} / ${plan.cost.usd_expected:,.2f}" in text
    assert "- Learning: it learns. reward/all/mean " in text and "(95%), rising" in text and report.plot_path in text
    assert report.learning == "learning"
    with open(report.plot_path, "rb") as png:
        assert png.read(8) == PNG_SIGNATURE
    assert re.search(r"Checkpoints: 1 READY \(steps 20; \d+\.\d MB\)", text) and "prime train checkpoints" in text
    assert "320 traces" in text and "download finished; complete" in text and "manifest.jsonl" in text
    assert f"plan {plan.plan_id}, approved via host_callback; secrets forwarded by name: WANDB_API_KEY" in text
    assert "wandb_v1_FAKE" not in report.model_dump_json()
    assert report.next_calls == [] and len(report.model_dump_json()) < 4000


def test_a_failed_run_reports_the_platforms_failure_analysis(ctx, emulator, launched):
    emulator.state.set_scenario("fail", at_step=4)
    _, run_id = launched()
    emulator.state.advance(QUEUE + STARTUP + 5 * STEP)
    report = ok(call(ctx, "mf_run_report", run_id=run_id, plot=False))
    assert "Outcome: failed after 4 of 20 steps" in report.markdown or "Outcome: failed after 3 of 20" in \
        report.markdown
    assert "CUDA OOM in trainer at step 4" in report.markdown and "confidence 86%" in report.markdown
    assert report.plot_path is None
    download = tool_call("mf_download_traces", run_id=run_id, dest=f"traces-{run_id}")
    assert report.next_calls == [download] and "not downloaded here" in report.markdown


def test_a_run_still_going_gets_a_provisional_report_and_the_calls_that_finish_it(ctx, emulator, launched):
    _, run_id = launched(volume="research-data", team=TEAM_RESEARCH_ID)
    emulator.state.advance(QUEUE + STARTUP + 6 * STEP)
    report = ok(call(ctx, "mf_run_report", run_id=run_id, plot=False))
    assert not report.terminal and "Outcome: still RUNNING" in report.markdown
    assert "\n- Cost so far: $" in report.markdown
    assert report.next_calls[0] == tool_call("mf_wait_for_run", run_id=run_id)
    assert f"Owner: team {TEAM_RESEARCH_ID}" in report.markdown
    assert f"on volume research-data under runs/{run_id}/checkpoints/; fetch one once the run has ended" in \
        report.markdown


def test_an_ended_run_on_a_volume_gets_its_checkpoint_fetched_and_reported(ctx, emulator, launched, tmp_path):
    _, run_id = launched(volume="research-data", team=TEAM_RESEARCH_ID)
    emulator.state.advance(QUEUE + STARTUP + 20 * STEP + 60 + 60)
    report = ok(call(ctx, "mf_run_report", run_id=run_id, plot=False, traces_dir=None))
    fetch = tool_call("mf_download_checkpoint", run_id=run_id, dest=f"checkpoint-{run_id}")
    assert fetch in report.next_calls and re.search(r"\d+(\.\d)? [kMG]B of disk per checkpoint", report.markdown)
    ok(call(ctx, "mf_download_checkpoint", run_id=run_id, dest=str(tmp_path / "ckpt")))
    done = ok(call(ctx, "mf_run_report", run_id=run_id, plot=False, checkpoint_dir=str(tmp_path / "ckpt")))
    line = next(t for t in done.markdown.splitlines() if t.startswith("- Checkpoints:"))
    assert f"Fetched: step 20, 5 files, 0.01 GB in {tmp_path / 'ckpt'} (5 verified by MD5)" in line
    assert "DCP" in line and "dcp_to_hf" in line and fetch not in done.next_calls


def test_a_run_this_store_did_not_launch_is_reported_without_a_plan(ctx, launch):
    run_id = launch(after=QUEUE + STARTUP + 3 * STEP)
    report = ok(call(ctx, "mf_run_report", run_id=run_id, plot=False))
    assert "not in this state store" in report.markdown and "usage" in report.markdown
    assert ok(call(ctx, "mf_get_run", run_id=run_id)).secret_names is None


def commands_of(text: str) -> list[str]:
    """The commands in backticks of a person's output, its lines joined as a terminal shows them."""
    return re.findall(r"`([^`]+)`", " ".join(text.split()))


def test_a_stalled_run_is_reported_stalled_with_its_evidence_and_the_logs_and_stop_commands_not_a_wait(
        ctx, emulator, launched, mf_env, tmp_path):
    emulator.state.set_scenario("stall", at_step=2)
    _, run_id = launched()
    emulator.state.advance(QUEUE + STARTUP + 2 * STEP + 3600)  # an hour without a new step
    report = ok(call(ctx, "mf_run_report", run_id=run_id, plot=False))
    progress_line = next(line for line in report.markdown.splitlines() if line.startswith("- Progress:"))
    assert report.verdict == "stalled" and progress_line.startswith("- Progress: stalled."), report.markdown
    assert re.search(r"No new step for (59 min 59 s|1 h), longer than the stall threshold", progress_line), \
        progress_line
    # the advice is check-progress's for a stalled run: the logs, then a stop; never a wait that does not end
    checked = ok(call(ctx, "mf_check_progress", run_id=run_id))
    assert report.next_calls[:len(checked.next_calls)] == checked.next_calls
    assert [c.tool for c in report.next_calls] == ["mf_summarize_logs", "mf_stop_run", "mf_download_traces"]
    assert checked.next_step in report.next_step and "mf_wait_for_run" not in report.next_step
    # a person reads the same at the terminal, and the commands work when pasted
    shown = mf("run-report", run_id, "--no-plot", env=mf_env, cwd=tmp_path)
    assert shown.returncode == 0 and f"Run {run_id} is RUNNING, stalled" in shown.stderr, shown.stderr
    logs, stop = (next(c for c in commands_of(shown.stderr) if f" {name} {run_id}" in c)
                  for name in ("summarize-logs", "stop-run"))
    assert "wait-for-run" not in shown.stderr
    summarized = pasted(logs, mf_env, tmp_path)
    assert summarized.returncode == 0, summarized.stderr
    stopped = pasted(stop, mf_env, tmp_path)  # planned, waiting for a person's approval (exit 4)
    assert stopped.returncode == 4 and f"stop run {run_id}" in stopped.stderr, stopped.stderr


def test_a_run_planned_in_one_folder_is_reported_with_its_plan_from_any_other(emulator, frozen_ctx, mf_env,
                                                                             tmp_path):
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    config = project / "rl.toml"
    shutil.copy(EXAMPLE, config)
    env = {k: v for k, v in mf_env.items() if k != "MODEL_FACTORY_STATE_DIR"}  # the per-user store, of HOME
    planner = Context(env=env, home=tmp_path / "home", cwd=project,
                      approver=lambda request: True)  # the tools that planned it, in the project folder
    plan = ok(call(planner, "mf_plan_run", config_path=str(config), team="personal"))
    run_id = ok(call(planner, "mf_dispatch_run", plan_id=plan.plan_id)).run_id
    planner.close()
    emulator.state.advance(QUEUE + STARTUP + 3 * STEP)
    estimate = f"the plan's estimate of ${plan.cost.usd_low:,.2f} / ${plan.cost.usd_expected:,.2f}"
    # from a folder below the project, and from one outside it: the same store, so the same plan
    for cwd in (project / "sub", tmp_path):
        shown = mf("run-report", run_id, "--no-plot", env=env, cwd=cwd)
        assert shown.returncode == 0 and estimate in " ".join(shown.stdout.split()), shown.stdout
    # a state folder named elsewhere: which store was read, and how to point at the right one
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    named = {**env, "MODEL_FACTORY_STATE_DIR": str(tmp_path / "state")}
    other = mf("run-report", run_id, "--no-plot", env=named, cwd=elsewhere)
    said = " ".join(other.stdout.split())
    assert f"No plan for run {run_id} in the state store of {tmp_path / 'state'} (from MODEL_FACTORY_STATE_DIR)" \
           in said and "run this command again with MODEL_FACTORY_STATE_DIR set to that folder" in said, said
    spend = mf("get-spend", run_id, env=named, cwd=elsewhere)
    assert f"No plan for run {run_id} in the state store of {tmp_path / 'state'}" in " ".join(spend.stderr.split())


def test_the_report_advises_adding_ckpt_only_to_a_run_whose_config_has_none(ctx, launch, examples_dir):
    import tomllib

    def report_of(example: str, edit=None, steps: int = 3) -> str:
        config = tomllib.loads((examples_dir / example).read_text())
        if edit:
            edit(config)
        run_id = launch(config=config, after=QUEUE + STARTUP + steps * STEP)
        line = [t for t in ok(call(ctx, "mf_run_report", run_id=run_id, plot=False)).markdown.splitlines()
                if t.startswith("- Checkpoints:")]
        assert len(line) == 1
        return line[0]

    bare = report_of("basic/reverse-text/rl.toml")  # a bare [ckpt]: one checkpoint at the end, none before
    assert bare == "- Checkpoints: none yet (the config's `[ckpt]` saves them at the end of the run).", bare
    every = report_of("basic/reverse-text/rl.toml", lambda c: c.update(ckpt={"interval": 5}))
    assert "none yet (the config's `[ckpt]` saves them every 5 steps)" in every, every
    trainer = report_of("basic/reverse-text/rl.toml", lambda c: (c.pop("ckpt"), c["trainer"].update(
        ckpt={"interval": 8})))  # the trainer's own table, another TOML level
    assert "`[trainer.ckpt]` saves them every 8 steps" in trainer, trainer
    without = report_of("basic/hendrycks-sanity/rl.toml", steps=30)  # no [ckpt] at all: the advice is due
    assert "the config has no `[ckpt]`" in without and "add one" in without, without


def test_spend_past_the_plans_high_estimate_is_a_warning(ctx, emulator, launched):
    emulator.state.set_scenario("stall", at_step=2)
    plan, run_id = launched(seconds_per_step=1)  # an estimate far too low for a run that stalls
    emulator.state.advance(6 * 3600)
    report = ok(call(ctx, "mf_run_report", run_id=run_id, plot=False))
    assert f"Spend so far passes the plan's high estimate of ${plan.cost.usd_high:,.2f}" in report.markdown
    assert "reported by the platform's usage (priced per token)" in report.markdown
    assert "from running time" in report.markdown


def test_get_run_and_list_launches_show_the_secret_names_a_run_was_launched_with(ctx, emulator, launched):
    plan, run_id = launched(secrets=["WANDB_API_KEY"])
    run = ok(call(ctx, "mf_get_run", run_id=run_id))
    assert (run.secret_names, run.plan_id) == (["WANDB_API_KEY"], plan.plan_id)
    entry = next(e for e in ok(call(ctx, "mf_list_launches")).launches if e.plan_id == plan.plan_id)
    assert entry.secret_names == ["WANDB_API_KEY"] and entry.run_id == run_id


def test_the_run_name_suffix_is_explained_once_in_the_summary_and_is_no_warning(ctx, launched):
    plan, _ = launched()
    suffix = plan.run_name.rsplit("-", 1)[1]
    assert not any(suffix in w for w in plan.warnings)
    assert plan.summary.count(f"-{suffix} marks this plan") == 1


def test_a_plan_validated_against_another_prime_rl_commit_than_the_run_uses_says_so(ctx, emulator, tmp_path):
    config = tmp_path / "rl.toml"
    shutil.copy(EXAMPLE, config)
    plan = ok(call(ctx, "mf_plan_run", config_path=str(config), team="personal"))
    validated, runs_on = plan.validation.schema_commit, plan.runtime.schema_commit
    assert validated and runs_on and validated != runs_on  # the emulator's image is not the snapshot's commit
    mismatch = [w for w in plan.warnings if w.startswith("Validated against")]
    assert len(mismatch) == 1 and f"prime-rl {validated[:12]} (snapshot), but the run uses {runs_on[:12]}" in \
        mismatch[0] and "validating with schema prime" in mismatch[0]
    assert mismatch[0] in plan.summary
    # pinned to the commit it was validated against: no warning
    pinned = ok(call(ctx, "mf_plan_run", config_path=str(config), team="personal", source_ref=validated))
    assert pinned.runtime.schema_commit == validated and not any("Validated against" in w for w in pinned.warnings)


def test_the_plan_labels_both_config_hashes_and_says_what_submission_supported_false_means(ctx, emulator, launched):
    emulator.state.prepare_submission_supported = True
    plan, _ = launched()
    config_line = next(line for line in plan.summary.splitlines() if line.strip().startswith("Config:"))
    assert f"file sha256 {plan.file_sha256[:12]}" in config_line and "config as sent, sha256" in config_line
    assert plan.runtime.submission_supported is True and "submission_supported" not in plan.summary
    emulator.state.prepare_submission_supported = False  # the emulator's default, as the trial saw
    plan, _ = launched()
    assert plan.runtime.submission_supported is False
    assert "the platform validates the config on submission" in plan.runtime.note
    assert "submission_supported false" in plan.summary


def test_list_runs_reads_the_latest_step_of_every_page_with_one_request_per_started_run(ctx, emulator, launched):
    from tests.conftest import Recorder

    started = [launched()[1] for _ in range(3)]
    emulator.state.set_scenario("stay_queued")
    queued = launched()[1]
    emulator.state.advance(QUEUE + STARTUP + 4 * STEP)
    recorder = Recorder.install(emulator)
    for page in (1, 2):
        recorder.requests.clear()
        runs = ok(call(ctx, "mf_list_runs", limit=2, page=page)).runs
        steps = {r.run_id: r.latest_step for r in runs}
        progress = [r for r in recorder.requests if r.path.endswith("/progress")]
        assert len(runs) == 2 and len(progress) == sum(1 for r in runs if r.status != "QUEUED")
        assert all(steps[r] == 4 for r in started if r in steps) and steps.get(queued) is None


def test_the_report_counts_failed_rollouts_and_names_their_most_common_error(ctx, emulator, launched, tmp_path):
    _, run_id = launched()
    emulator.state.advance(QUEUE + STARTUP + 20 * STEP + FINALIZE + 60)
    ok(call(ctx, "mf_download_traces", run_id=run_id, dest="traces"))
    # what the downloaded files themselves say: episode envelopes with ok false, traces scored null
    envelopes = [json.loads(p.read_text()) for p in (tmp_path / "traces" / "episodes").glob("*.json")]
    documents = [json.loads(p.read_text()) for p in (tmp_path / "traces" / "traces").glob("*.json")]
    failed = [e for e in envelopes if e["ok"] is False]
    unscored = [d for d in documents if d["score"]["reward"] is None]
    assert failed and unscored and len(envelopes) == 80 and len(documents) == 320
    errors = collections.Counter(f"{e['errors'][0]['type']}: {e['errors'][0]['message']}" for e in failed)
    (error, count), = errors.most_common(1)
    report = ok(call(ctx, "mf_run_report", run_id=run_id, traces_dir="traces", plot=False))
    traces_line = next(line for line in report.markdown.splitlines() if line.startswith("- Traces:"))
    assert f"Failed rollouts: {len(failed)}/80 episodes" in traces_line
    assert f"{len(unscored)} unscored (no reward)" in traces_line
    assert f"most common error ({count}x): {error}" in traces_line
    assert (report.failed_episodes, report.unscored_traces) == (len(failed), len(unscored))
    assert len(report.model_dump_json()) < 4000
    # without the download: the traces host's failed episodes, in one request
    host = ok(call(ctx, "mf_run_report", run_id=run_id, plot=False))
    assert f"320 traces on the traces host, {len(failed)} failed episode(s); most common error ({count}x): {error}" \
        in host.markdown
    assert (host.failed_episodes, host.unscored_traces) == (len(failed), None)
