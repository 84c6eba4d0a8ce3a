"""The fault matrix in reduced form (benchmarks/fault_matrix.py runs it whole): every registry tool
against a few faults, and every fault against the tools that launch and stop runs, over real
HTTP against the emulator. Each call ends in a result or a typed ToolError, never an unexpected
exception, a hang, a duplicate run or a partial file. Also: the harness fails for a tool without
a set-up, and its file check catches what it claims to.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks._proof import world
from benchmarks._proof.matrix import FAULTS, bad_files, judge, misclassified, render, run_matrix
from skill import registry
from tools.errors import ToolError

#: Every tool against these: a status, a reset mid-body, truncated JSON and (for writes) commit-then-timeout.
REDUCED = ("503", "reset", "trunc", "commit")
#: Every fault against these: the create and the control call.
DEEP = ("mf_dispatch_run", "mf_stop_run")


def by_name(names) -> list:
    return [f for f in FAULTS if f.name in names]


def test_every_registry_tool_has_a_set_up():
    assert world.missing_setups() == []
    assert set(world.SETUPS) <= {spec.name for spec in registry.TOOLS}, "a set-up for a tool the registry lacks"


# Many commands in one test (each its own process or fault): a bound for a hang that fits that much work on a
# machine loaded ten times over (the default 300 s is per test, sized for one command's work).
@pytest.mark.timeout(1200)
def test_every_tool_survives_the_reduced_faults(tmp_path: Path):
    report = run_matrix(None, by_name(REDUCED), root=tmp_path)
    table = render(report, by_name(REDUCED))
    assert report.ok, table
    assert {c.tool for c in report.cells} == {spec.name for spec in registry.TOOLS}
    assert sum(c.calls for c in report.cells) > 3 * len(registry.TOOLS)
    resume = {c.fault: c for c in report.cells if c.tool == "mf_resume_run"}
    assert resume["commit"].results and not resume["commit"].errors  # a resume's lost answer: reconciled, not re-sent
    pause = {c.fault: c for c in report.cells if c.tool == "mf_pause_run"}
    assert pause["commit"].calls and not pause["commit"].problems  # a control call's lost answer: the state is read


# Many commands in one test (each its own process or fault): a bound for a hang that fits that much work on a
# machine loaded ten times over (the default 300 s is per test, sized for one command's work).
@pytest.mark.timeout(1200)
def test_the_launch_and_stop_tools_survive_every_fault(tmp_path: Path):
    report = run_matrix(DEEP, FAULTS, root=tmp_path)
    table = render(report, FAULTS)
    assert report.ok, table
    dispatch = {c.fault: c for c in report.cells if c.tool == "mf_dispatch_run"}
    assert dispatch["commit"].results and not dispatch["commit"].errors  # the lost answer was reconciled
    assert dispatch["timeout"].errors.get("ambiguous_launch")  # a held create: never re-sent, found later
    assert dispatch["401"].errors.get("unauthorized")


def test_a_tool_without_a_set_up_fails_the_harness(tmp_path: Path, monkeypatch):
    monkeypatch.delitem(world.SETUPS, "mf_get_run")
    report = run_matrix(["mf_get_run"], by_name(["503"]), root=tmp_path)
    assert not report.ok and report.cells == []
    assert any(p.tool == "mf_get_run" and "no set-up" in p.detail for p in report.setup_problems)
    assert "set-up failures: 2" in render(report, by_name(["503"]))  # the registry check and the call


def test_a_set_up_that_leaves_a_required_field_out_fails_the_harness(tmp_path: Path, monkeypatch):
    monkeypatch.setitem(world.SETUPS, "mf_get_run", lambda stage: {})
    report = run_matrix(["mf_get_run"], by_name(["503"]), root=tmp_path)
    assert not report.ok and "leaves required fields out: run_id" in report.setup_problems[0].detail


def test_the_file_check_finds_temporary_and_cut_files(tmp_path: Path):
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "t1.json").write_text(json.dumps({"nodes": []}))
    (tmp_path / "traces" / "t2.json").write_text('{"nodes": [')
    (tmp_path / "traces" / ".t3.json.abc.partial").write_bytes(b"{")
    (tmp_path / ".cfg.toml.x1.tmp").write_text("a = 1")
    (tmp_path / "cfg.toml").write_text("a = [1,")
    (tmp_path / "plot.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 20)
    found = "\n".join(bad_files(tmp_path))
    for name in ("t2.json", ".t3.json.abc.partial", ".cfg.toml.x1.tmp", "cfg.toml", "plot.png"):
        assert name in found
    assert "t1.json" not in found


def test_the_call_check_accepts_typed_errors_only():
    typed = ToolError(code="unavailable", message="m", fix="Retry.")
    assert judge(typed) is None
    assert "internal_error" in judge(ToolError(code="internal_error", message="boom", fix="Report it."))
    assert "without a fix" in judge(ToolError(code="unavailable", message="m", fix=""))
    assert "raised" in judge(RuntimeError("escaped"))


def test_the_class_check_wants_a_retry_for_a_passing_fault_and_the_status_own_code_for_the_others():
    final = ToolError(code="invalid_request", message="m", fix="Correct it.")
    retry = ToolError(code="unavailable", message="m", fix="Retry.", retryable=True)
    lost = ToolError(code="ambiguous_launch", message="m", fix="Reconcile.", ambiguous=True)
    assert "neither retryable nor ambiguous" in misclassified("503", final)
    assert misclassified("503", retry) is None and misclassified("commit", lost) is None
    assert "calls for unauthorized" in misclassified("401", ToolError(code="forbidden", message="m", fix="f"))
    assert misclassified("401", ToolError(code="unauthorized", message="m", fix="f")) is None
