"""The state store: one SQLite database per user, typed records, migrations, damage, busy, pruning,
and an old ledger imported once for the record. Real files; the launch tools on the emulator where a
record's use is what is checked."""

from __future__ import annotations

import json
import sqlite3
import stat
from datetime import timedelta
from pathlib import Path

import pytest
from _helpers import EXAMPLE, emulator_env, ok, store_bytes

from tools.core import Context
from tools.errors import ToolError, ToolFailure
from tools.guardrails import confirmation as gate
from tools.guardrails import store as store_module
from tools.guardrails.records import AuditRecord, PlanRecord, iso, utc_now
from tools.guardrails.scrubbing import Scrubber
from tools.guardrails.store import MIGRATIONS, Store, state_folder
from tools.launch import ListLaunchesInput, PlanRunInput, list_launches, plan_run

CANARY = "canary-store-secret-QzXkWvBm0123"


def a_plan(plan_id: str = "plan_a", **facts) -> PlanRecord:
    material = {"action": "launch", "config_sha256": "c" * 64, "team_id": None, "gpu_type": None, "gpu_count": 2,
                "volume": None, "source_ref": None, "image_tag": None, "secret_names": [], "max_steps": 20,
                "cost": None}
    return PlanRecord.of(plan_id, gate.plan_hash(material), material, **facts)


def code_of(failure: pytest.ExceptionInfo[ToolFailure]) -> str:
    return failure.value.error.code


def test_the_state_folder_is_per_user_and_named_by_the_environment(tmp_path):
    home = tmp_path / "home"
    assert state_folder({}, home) == home / ".local" / "state" / "model-factory"
    assert state_folder({"XDG_STATE_HOME": str(tmp_path / "xdg")}, home) == tmp_path / "xdg" / "model-factory"
    assert state_folder({"XDG_STATE_HOME": "relative/path"}, home) == home / ".local" / "state" / "model-factory"
    assert state_folder({"MODEL_FACTORY_STATE_DIR": str(tmp_path / "s"), "XDG_STATE_HOME": "/x"}, home) == \
        tmp_path / "s"
    ctx = Context(env={}, home=home, cwd=tmp_path / "anywhere")
    assert ctx.state_path() == home / ".local" / "state" / "model-factory"  # whatever the working folder


def test_the_first_use_creates_a_private_folder_and_database_at_the_current_schema(tmp_path):
    folder = tmp_path / "state" / "model-factory"
    store = Store(folder)
    assert Store.recorded_env_files(folder) == [] and not folder.exists()  # the scrubber's read creates nothing
    store.add_plan(a_plan())
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "state.db").stat().st_mode) == 0o600
    with store.read() as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert [p.plan_id for p in Store(folder).plans()] == ["plan_a"]  # another connection reads it


def test_records_are_typed_and_scrubbed_before_they_reach_the_disk(tmp_path):
    store = Store(tmp_path, Scrubber([("HF_TOKEN", CANARY)]))
    stored = store.add_plan(a_plan(summary=f"server said {CANARY}", env_files=["/p/.env"]))
    assert isinstance(stored, PlanRecord) and "[REDACTED:HF_TOKEN]" in stored.summary
    store.add_audit(AuditRecord(at=iso(utc_now()), surface="cli", tool="mf_get_run", outcome="ok",
                                arguments=json.dumps({"run_id": CANARY})))
    assert CANARY.encode() not in store_bytes(tmp_path)
    assert store.plan("plan_a").summary == "server said [REDACTED:HF_TOKEN]"
    assert store.audit()[0].arguments == '{"run_id": "[REDACTED:HF_TOKEN]"}'
    assert Store.recorded_env_files(tmp_path) == ["/p/.env"]


def test_an_older_database_is_migrated_in_place_and_keeps_its_records(tmp_path, monkeypatch):
    store = Store(tmp_path)
    store.add_plan(a_plan())
    store.close()
    monkeypatch.setattr(store_module, "MIGRATIONS", [*MIGRATIONS, "ALTER TABLE approvals ADD COLUMN max_usd REAL"])
    upgraded = Store(tmp_path)
    assert [p.plan_id for p in upgraded.plans()] == ["plan_a"]
    with upgraded.read() as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS) + 1
        assert "max_usd" in [row[1] for row in conn.execute("PRAGMA table_info(approvals)")]
    upgraded.close()


def test_a_database_of_a_newer_schema_is_refused_by_name_and_not_read(tmp_path):
    Store(tmp_path).add_plan(a_plan())
    with sqlite3.connect(tmp_path / "state.db") as conn:
        conn.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    store = Store(tmp_path)
    with pytest.raises(ToolFailure) as failure:
        store.plans()
    assert code_of(failure) == "state_unusable" and "newer version" in failure.value.error.message
    assert str(tmp_path / "state.db") in failure.value.error.message


def test_a_damaged_database_is_named_never_read_silently_and_nothing_is_planned(emulator, tmp_path):
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "state.db").write_bytes(b"not a database at all " * 200)
    ctx = Context(env=emulator_env(emulator), home=tmp_path, state_dir=tmp_path / "state", cwd=tmp_path)
    listed = list_launches(ListLaunchesInput(), ctx)
    assert isinstance(listed, ToolError) and listed.code == "state_unusable"
    assert str(tmp_path / "state" / "state.db") in listed.message and "mv " in listed.fix
    plan = plan_run(PlanRunInput(config_path=str(EXAMPLE), team="personal"), ctx)
    assert isinstance(plan, ToolError) and plan.code == "state_unusable"
    assert emulator.state.create_attempts == 0
    ctx.close()


def test_a_write_held_by_another_process_is_state_busy_and_retryable(tmp_path):
    Store(tmp_path).add_plan(a_plan())
    other = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(ToolFailure) as failure:
            Store(tmp_path, busy_seconds=0.05).add_plan(a_plan("plan_b"))
        assert code_of(failure) == "state_busy" and failure.value.error.retryable
    finally:
        other.execute("ROLLBACK")
        other.close()


def test_the_audit_trail_keeps_the_newest_rows_and_none_past_its_age(tmp_path, monkeypatch):
    monkeypatch.setattr(store_module, "AUDIT_MAX_ROWS", 5)
    store = Store(tmp_path)
    old = iso(utc_now() - timedelta(days=store_module.AUDIT_MAX_DAYS + 1))
    store.add_audit(AuditRecord(at=old, surface="cli", tool="mf_list_runs", outcome="ok", arguments="{}"))
    for n in range(8):
        store.add_audit(AuditRecord(at=iso(utc_now()), surface="mcp", tool=f"mf_tool_{n}", outcome="ok",
                                    arguments="{}"))
    assert [r.tool for r in store.audit()] == [f"mf_tool_{n}" for n in range(3, 8)]  # oldest first
    assert [r.tool for r in store.audit(limit=2)] == ["mf_tool_6", "mf_tool_7"]
    long = json.dumps({"text": "x" * 5000})
    store.add_audit(AuditRecord(at=iso(utc_now()), surface="cli", tool="mf_long", outcome="ok", arguments=long))
    assert len(store.audit()[-1].arguments) == store_module.AUDIT_ARGUMENT_CHARS


def old_ledger(folder: Path, plan: PlanRecord, *, outcome: str | None = "created") -> Path:
    """An earlier version's launches.jsonl: a plan, an approval (a forged one, or a person's), an attempt
    and its outcome."""
    folder.mkdir(parents=True, exist_ok=True)
    ts = iso(utc_now())
    lines = [{"ts": ts, "event": "plan", "plan_id": plan.plan_id, "plan_hash": plan.plan_hash, **plan.material,
              "config_path": "/p/rl.toml", "summary": "old plan"},
             {"ts": ts, "event": "approval", "plan_id": plan.plan_id, "plan_hash": plan.plan_hash,
              "token_sha256": "0" * 64, "channel": "terminal", "expires_at": iso(utc_now() + timedelta(hours=1))}]
    if outcome:
        lines += [{"ts": ts, "event": "attempt", "plan_id": plan.plan_id, "attempt_id": "att_1",
                   "plan_hash": plan.plan_hash, "channel": "terminal"},
                  {"ts": ts, "event": "outcome", "plan_id": plan.plan_id, "attempt_id": "att_1", "outcome": outcome,
                   "run_id": "crun_old" if outcome == "created" else None}]
    path = folder / "launches.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"torn')
    return path


def test_an_old_ledger_is_imported_once_for_the_record_without_its_approvals(tmp_path):
    ledger = old_ledger(tmp_path / "project" / ".model-factory", a_plan("plan_old"))
    before = ledger.read_bytes()
    store = Store(tmp_path / "state", legacy=[ledger], legacy_platform="https://api.example.invalid")
    state = gate.launch_state(store, "plan_old")
    [imported] = store.imported
    assert (imported.plans, imported.outcomes, imported.approvals_ignored) == (1, 1, 1)
    assert "never approved or sent" in imported.words() and "not written again" in imported.words()
    assert state.plan.imported_from == str(ledger.resolve()) and state.approvals == []
    assert (state.status, state.run_id) == ("dispatched", "crun_old")  # launch-once keeps what it launched
    assert gate.plan_of_run(store, "crun_old").plan_id == "plan_old"
    store.close()
    again = Store(tmp_path / "state", legacy=[ledger])
    assert again.plans() and again.imported == [] and len(again.imports()) == 1  # once
    assert ledger.read_bytes() == before  # never written


def test_an_imported_plan_is_never_approved_or_sent(tmp_path):
    ledger = old_ledger(tmp_path / "old", a_plan("plan_old"), outcome=None)
    store = Store(tmp_path / "state", legacy=[ledger])
    plan = store.plan("plan_old")
    with pytest.raises(ToolFailure) as failure:
        gate.mint(store, "plan_old", plan.plan_hash, "terminal")
    assert code_of(failure) == "unknown_plan" and "imported" in failure.value.error.message
    with pytest.raises(ToolFailure) as failure:
        gate.claim_dispatch(store, "plan_old", plan.plan_hash, "mfc_plan_old_" + "0" * 40)
    assert code_of(failure) == "unknown_plan"


def test_list_launches_says_what_an_import_brought_in(emulator, tmp_path):
    project = tmp_path / "project"
    old_ledger(project / ".model-factory", a_plan("plan_old"))
    ctx = Context(env=emulator_env(emulator), home=tmp_path, state_dir=tmp_path / "state", cwd=project)
    listed = ok(list_launches(ListLaunchesInput(), ctx))
    assert [e.plan_id for e in listed.launches] == ["plan_old"] and "Imported 1 plan(s)" in listed.store_warning
    assert listed.store_path == str(tmp_path / "state" / "state.db")
    ctx.close()
