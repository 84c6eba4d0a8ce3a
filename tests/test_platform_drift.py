"""When the platform answers something unexpected: one run row of the wrong shape, a status the tools
do not know, a read answered with a body cut short, and a runs list whose pages repeat. Real HTTP
against the emulator, its answers changed by its ``patch``, ``truncate`` and ``cursor`` faults.
"""

from __future__ import annotations

import shutil
import tomllib

import pytest
from _helpers import EXAMPLE, call, dispatch, err, example, make_ctx, ok, planned, write_policy
from test_launch_once_copies import project_ctx

from skill.emulator.faults import route_path
from tools.launch import approve_plan
from tools.platform import errors as perr
from tools.platform import wire

RUN = route_path("/api/v1/rft/runs/{run_id}")

#: Rows of the wrong shape, each one field (or the whole row) away from a readable run.
BAD_ROWS = [
    pytest.param({"status": None}, id="status-null"),
    pytest.param({"id": None}, id="id-null"),
    pytest.param({"gpuCount": "eight"}, id="gpu-count-word"),
    pytest.param({"createdAt": "not-a-date"}, id="created-at-not-a-date"),
    pytest.param({"teamId": 12345}, id="team-id-integer"),
    pytest.param("not-an-object", id="row-a-string"),
    pytest.param(None, id="row-null"),
]


def runs_named(frozen_ctx, emulator, rl_config, count: int) -> list[str]:
    """``count`` runs created one simulated second apart (newest first on the list)."""
    ids = []
    for n in range(count):
        ids.append(frozen_ctx.platform().create_run(wire.build_create_body(rl_config, name=f"drift-{n}")).run_id)
        emulator.state.advance(1)
    return ids


# -- 1. one unreadable row hides no other run ------------------------------------------------------


@pytest.mark.parametrize("row_value", BAD_ROWS)
def test_a_run_row_of_the_wrong_shape_is_named_and_the_other_runs_are_listed(frozen_ctx, emulator, rl_config,
                                                                             row_value):
    ids = runs_named(frozen_ctx, emulator, rl_config, 3)
    emulator.faults.patch("GET", "/rft/runs", rows="runs", row=1, row_value=row_value)
    listed = ok(call(frozen_ctx, "mf_list_runs", team="personal"))
    assert len(listed.runs) == 2 and {r.run_id for r in listed.runs} < set(ids)
    assert len(listed.unreadable_runs) == 1 and listed.unreadable_runs[0].startswith("row 2")
    assert "could not be read" in listed.note and listed.total == 3


def test_an_unreadable_row_is_named_by_its_id_and_field_and_never_by_its_values(frozen_ctx, emulator, rl_config):
    runs_named(frozen_ctx, emulator, rl_config, 2)
    emulator.faults.patch("GET", "/rft/runs", rows="runs", row=0, row_value={"gpuCount": "eight-fake-gpus"})
    listed = ok(call(frozen_ctx, "mf_list_runs", team="personal"))
    (row,) = listed.unreadable_runs
    bad_id = row.split("(id ")[1].split(")")[0]
    assert bad_id in emulator.state.runs and "gpuCount" in row and "eight-fake-gpus" not in row


def test_a_status_scan_skips_the_unreadable_row_and_names_it(frozen_ctx, emulator, rl_config):
    runs_named(frozen_ctx, emulator, rl_config, 4)
    emulator.faults.patch("GET", "/rft/runs", rows="runs", row=0, row_value={"status": None})
    listed = ok(call(frozen_ctx, "mf_list_runs", team="personal", status="queued"))
    assert listed.total == 3 and len(listed.unreadable_runs) == 1 and listed.unreadable_runs[0].startswith("page 1")


def test_a_copied_state_folder_never_launches_again_while_its_run_row_cannot_be_read(emulator, tmp_path):
    """The first copy launched; the second finds the run's row unreadable: it refuses, nothing is sent."""
    home, first = tmp_path / "home", tmp_path / "tu-A"
    home.mkdir()
    first.mkdir()
    shutil.copy(EXAMPLE, first / "my-run.toml")
    ctx = project_ctx(emulator, first, home)
    plan = planned(ctx, "my-run.toml", team="personal")
    code = approve_plan(plan.plan_id, "terminal", ctx)
    shutil.copytree(first, tmp_path / "tu-B")
    assert ok(dispatch(ctx, plan.plan_id, code)).status == "created"
    emulator.faults.patch("GET", "/rft/runs", rows="runs", row=0, row_value={"status": None})
    copy = project_ctx(emulator, tmp_path / "tu-B", home)
    refused = err(dispatch(copy, plan.plan_id, code), "unresolved_launch")
    assert "was not sent" in refused.message and "cannot be read" in refused.message and refused.retryable
    assert len(emulator.state.runs) == 1 and emulator.state.create_attempts == 1
    emulator.faults.clear()
    assert dispatch(copy, plan.plan_id, code).status == "already_dispatched"  # the same code, once it reads
    assert len(emulator.state.runs) == 1
    ctx.close(), copy.close()


def test_a_budget_policy_limiting_active_runs_approves_nothing_while_a_run_row_cannot_be_read(emulator, tmp_path):
    ctx = make_ctx(emulator, tmp_path)
    write_policy(tmp_path / "home", 'max_usd_per_run = 25.0\nmax_concurrent_runs = 5\nowners = ["personal"]\n')
    config = example(tmp_path, name="rl.toml")
    assert planned(ctx, config, team="personal").policy_approves is True
    runs_named(ctx, emulator, tomllib.loads(config.read_text()), 1)
    emulator.faults.patch("GET", "/rft/runs", rows="runs", row=0, row_value={"status": None})
    plan = planned(ctx, config, team="personal")
    assert plan.policy_approves is False
    assert dispatch(ctx, plan.plan_id).code == "confirmation_required" and len(emulator.state.runs) == 1
    ctx.close()


# -- 2. a status nobody knows ends the wait ------------------------------------------------------


@pytest.mark.parametrize("status", ["PREEMPTED", "TIMEOUT"])
def test_waiting_on_a_status_the_tools_do_not_know_says_so_at_once(frozen_ctx, emulator, launch, fake_time, status):
    run_id = launch(after=200)
    emulator.faults.patch("GET", RUN, rows="run", row_value={"status": status})
    waited = ok(call(frozen_ctx, "mf_wait_for_run", run_id=run_id))
    assert waited.polls == 1 and not waited.reached and waited.status == status
    assert waited.next_step.startswith(f"Unknown status {status}") and "again" not in waited.next_step
    assert [c.tool for c in waited.next_calls] == ["mf_get_run", "mf_summarize_logs"]
    progress = ok(call(frozen_ctx, "mf_check_progress", run_id=run_id))
    assert progress.verdict == "unknown" and progress.next_step == waited.next_step


# -- 3. a read answered with a body cut short is retried like a 5xx -------------------------------


def test_a_read_whose_answer_is_cut_short_once_is_retried_and_works(frozen_ctx, emulator, launch, fake_time):
    run_id = launch(after=200)
    rule = emulator.faults.truncate("GET", RUN, times=1)
    assert ok(call(frozen_ctx, "mf_get_run", run_id=run_id)).run_id == run_id
    assert rule.hits == 1 and fake_time.slept  # one back-off wait, then the whole answer


@pytest.mark.parametrize("path", [RUN, "/rft/runs"])
def test_a_read_whose_answer_stays_garbled_is_a_retryable_unavailable(frozen_ctx, emulator, launch, fake_time, path):
    run_id = launch(after=200)
    rule = emulator.faults.truncate("GET", path, times=None)
    tool, args = ("mf_get_run", {"run_id": run_id}) if path == RUN else ("mf_list_runs", {"team": "personal"})
    garbled = err(call(frozen_ctx, tool, **args), "unavailable")
    assert garbled.retryable and "not a JSON object" in garbled.message and rule.hits == 3
    assert "Correct the listed fields" not in garbled.fix


def test_a_create_answered_with_a_garbled_body_is_still_ambiguous_never_retried(frozen_ctx, emulator, rl_config):
    rule = emulator.faults.truncate("POST", "/training/runs", times=None)
    with pytest.raises(perr.Ambiguous):
        frozen_ctx.platform().create_run(wire.build_create_body(rl_config, name="drift"))
    assert rule.hits == 1


# -- 4. a runs list whose pages repeat ----------------------------------------------------------


@pytest.mark.parametrize("mode", ["repeat", "cycle"])
def test_a_runs_list_whose_pages_come_round_again_offers_no_next_page(frozen_ctx, emulator, rl_config, mode):
    emulator.state.max_concurrent_runs = 1000  # an account allowed this many runs at once
    runs_named(frozen_ctx, emulator, rl_config, 12)
    honest = [ok(call(frozen_ctx, "mf_list_runs", team="personal", limit=4, page=n)) for n in (1, 2, 3)]
    assert [p.next_page for p in honest] == [2, 3, None] and all(p.scan_complete for p in honest)
    emulator.faults.add(kind="cursor", mode=mode, method="GET", path="/rft/runs", times=None,
                        patch={"total": 100000, "total_pages": 25000})
    page, seen = 1, []
    while page is not None and len(seen) < 10:  # an agent following next_page
        listed = ok(call(frozen_ctx, "mf_list_runs", team="personal", limit=4, page=page))
        seen.append(listed)
        page = listed.next_page
    last = seen[-1]
    assert len(seen) == (2 if mode == "repeat" else 3) and not last.scan_complete and last.runs == []
    assert last.next_calls == [] and "not the page after" in last.note
    shown = [r.run_id for p in seen for r in p.runs]
    assert len(shown) == len(set(shown))
