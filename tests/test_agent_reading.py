"""The reading budget of the smoke-run path (benchmarks/agent_reading.py): SKILL.md plus the MCP
result text of every call of the smoke sequence, replayed through the MCP server (in memory)
against the emulator, stays within 35,000 characters, and the sequence really does the job.
The replay is made once for the module; the benchmark's printout is checked on that replay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import agent_reading

#: One worker runs this module: its module fixture is costly, and xdist would otherwise build it once per worker.
pytestmark = pytest.mark.xdist_group("test_agent_reading")

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def replayed():
    return agent_reading.replay()


def test_the_smoke_path_reads_at_most_35000_characters_and_finishes_the_job(replayed):
    reading, report = replayed
    figures = reading.figures()
    # counted from what was read: the documents' text and every result's text as the agent got it
    documents = sum(len((ROOT / doc).read_text(encoding="utf-8")) for doc in agent_reading.DOCS_READ)
    assert "SKILL.md" in agent_reading.DOCS_READ and figures["skill_chars"] == documents
    assert figures["tool_output_chars"] == sum(len(c["text"]) for c in reading.calls) > 0
    assert figures["total_chars"] <= agent_reading.BUDGET_CHARS == 35_000, figures
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


def test_the_benchmark_prints_one_json_object_with_the_figures_and_a_table_that_adds_up(replayed, capsys):
    assert agent_reading.main(["--json"], replayed=replayed) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["total_chars"] == figures["skill_chars"] + figures["tool_output_chars"] <= 35_000
    assert [c["chars"] for c in figures["calls"]] == [c["chars"] for c in replayed[0].calls]
    assert agent_reading.main([], replayed=replayed) == 0
    table = capsys.readouterr().out
    lines = table.splitlines()
    rows = [line.rsplit(None, 1) for line in lines[2:2 + len(agent_reading.DOCS_READ) + len(figures["calls"])]]
    assert sum(int(chars) for _, chars in rows) == figures["total_chars"], table
    total = next(line for line in lines if line.startswith("total (budget 35,000)"))
    assert int(total.split()[-1]) == figures["total_chars"], table
