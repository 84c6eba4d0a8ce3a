"""The reading budget of the smoke-run path (benchmarks/agent_reading.py): the tool catalogue, SKILL.md
(and any reference its table sends an agent to on that path), plus the MCP result text of every call of
the smoke sequence, replayed through the MCP server (in memory) against the emulator, stays within 45,000
characters, and the sequence really does the job. The replay is made once for the module; the
benchmark's printout is checked on that replay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import agent_reading
from skill import registry

#: One worker runs this module: its module fixture is costly, and xdist would otherwise build it once per worker.
pytestmark = pytest.mark.xdist_group("test_agent_reading")

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def replayed():
    return agent_reading.replay()


def test_the_smoke_path_reads_at_most_45000_characters_and_finishes_the_job(replayed):
    reading, report = replayed
    figures = reading.figures()
    # counted from what was read: the catalogue, the documents' text and every result's text as the agent got it
    documents = sum(len((ROOT / doc).read_text(encoding="utf-8")) for doc in figures["docs_read"])
    assert figures["docs_read"][0] == "SKILL.md" and figures["skill_chars"] == documents
    assert figures["catalogue_chars"] == len(json.dumps(registry.anthropic_tools(), separators=(",", ":")))
    assert figures["tool_output_chars"] == sum(len(c["text"]) for c in reading.calls) > 0
    assert figures["total_chars"] == figures["catalogue_chars"] + figures["skill_chars"] + figures["tool_output_chars"]
    assert figures["total_chars"] <= agent_reading.BUDGET_CHARS == 45_000, figures
    assert 0 < figures["tools_list_chars"] < 25_000  # no output schema repeating the error shape per tool
    tools = [c["tool"] for c in reading.calls]
    assert tools[:5] == ["mf_preflight", "mf_prepare_config", "mf_plan_run", "mf_dispatch_run", "mf_dispatch_run"]
    assert tools[-2:] == ["mf_download_traces", "mf_run_report"] and "mf_check_progress" in tools
    assert (report["status"], report["terminal"], report["traces_complete"]) == ("COMPLETED", True, True)
    assert "secrets forwarded by name: WANDB_API_KEY" in report["markdown"]


def test_the_references_skill_md_sends_an_agent_to_on_the_smoke_path_are_counted(replayed):
    reading, _ = replayed
    assert reading.codes() == {"confirmation_required"}  # the one code the path meets, answered by step 4
    rows = agent_reading.reference_rows()
    assert len(rows) >= 7 and all(path.startswith("references/") for path, _ in rows)
    # SKILL.md says all the smoke path needs (W&B forwarding in step 3, confirmation_required in step 4), so
    # its table sends the agent nowhere on it; a row naming either would be counted
    assert reading.figures()["docs_read"] == ["SKILL.md"] and reading.figures()["references_sent"] == 0
    text = (ROOT / "SKILL.md").read_text(encoding="utf-8")
    assert "`confirmation_required` (step 4)" in text and "`WANDB_API_KEY` in `secrets`" in text
    assert agent_reading.docs_read({"owner_ambiguous"}) == ["SKILL.md"]
    worded = [(path, when + ", any error code") if "troubleshooting" in path else (path, when) for path, when in rows]
    original = agent_reading.reference_rows
    try:  # the same table with a row for every error code: troubleshooting.md is read and counted
        agent_reading.reference_rows = lambda: worded
        assert agent_reading.docs_read(set()) == ["SKILL.md", "references/troubleshooting.md"]
    finally:
        agent_reading.reference_rows = original


def test_skill_md_tells_the_agent_what_the_smoke_sequence_does():
    text = (ROOT / "SKILL.md").read_text(encoding="utf-8")
    for said in ("`basic/reverse-text/rl`", "Loop on `mf_wait_for_run(run_id)`", "mf_download_traces(run_id, dest)",
                 "mf_run_report(run_id, traces_dir=dest)", "needs none of them"):
        assert said in text


def test_the_benchmark_prints_one_json_object_with_the_figures_and_a_table_that_adds_up(replayed, capsys):
    assert agent_reading.main(["--json"], replayed=replayed) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["total_chars"] == figures["catalogue_chars"] + figures["skill_chars"] + \
        figures["tool_output_chars"] <= 45_000
    assert figures["catalogue_chars"] <= figures["catalogue_budget_chars"] == 15_000
    assert [c["chars"] for c in figures["calls"]] == [c["chars"] for c in replayed[0].calls]
    assert agent_reading.main([], replayed=replayed) == 0
    table = capsys.readouterr().out
    lines = table.splitlines()
    rows = [line.rsplit(None, 1) for line in lines[2:3 + len(figures["docs_read"]) + len(figures["calls"])]]
    assert sum(int(chars) for _, chars in rows) == figures["total_chars"], table
    total = next(line for line in lines if line.startswith("total (budget 45,000)"))
    assert int(total.split()[-1]) == figures["total_chars"], table
