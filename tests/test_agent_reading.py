"""The reading budget of the smoke-run path (benchmarks/agent_reading.py): SKILL.md plus the MCP
result text of every call of the smoke sequence, replayed through the MCP server (in memory)
against the emulator, stays within 35,000 characters, and the sequence really does the job."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchmarks import agent_reading

ROOT = Path(__file__).resolve().parent.parent


def test_the_smoke_path_reads_at_most_35000_characters_and_finishes_the_job():
    reading, report = agent_reading.replay()
    figures = reading.figures()
    assert figures["total_chars"] == figures["skill_chars"] + figures["tool_output_chars"]
    assert figures["total_chars"] <= agent_reading.BUDGET_CHARS == 35_000, figures
    assert agent_reading.DOCS_READ == ("SKILL.md",)  # the smoke path needs no reference
    tools = [c["tool"] for c in reading.calls]
    assert tools[:5] == ["mf_preflight", "mf_prepare_config", "mf_plan_run", "mf_dispatch_run", "mf_dispatch_run"]
    assert tools[-2:] == ["mf_download_traces", "mf_run_report"] and "mf_check_progress" in tools
    assert (report["status"], report["terminal"], report["traces_complete"]) == ("COMPLETED", True, True)
    assert "secrets forwarded by name: WANDB_API_KEY" in report["markdown"]


def test_skill_md_tells_the_agent_what_the_smoke_sequence_does():
    text = (ROOT / "SKILL.md").read_text(encoding="utf-8")
    for said in ("`basic/reverse-text/rl`", "Loop on `mf_wait_for_run(run_id)`", "mf_download_traces(run_id, dest)",
                 "mf_run_report(run_id, traces_dir=dest)", "needs none of them"):
        assert said in text


def test_the_benchmark_prints_one_json_object_with_the_three_figures():
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "agent_reading.py"), "--json"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)
    assert {"skill_chars", "tool_output_chars", "total_chars"} <= set(figures)
    assert figures["total_chars"] <= 35_000
