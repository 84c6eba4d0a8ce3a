"""What a person at a terminal reads: hints as commands to paste, the program named so their shell
finds it, and layouts that fit 80 columns without splitting an id, a path or a command."""

from __future__ import annotations

import io
import os
import shlex
import sys

import pytest

from skill import registry, terminal
from skill.cli import tool_parser
from skill.render import command, for_people
from tools import units
from tools.core import PROGRAM, program
from tools.errors import call


def parsed(cmd: str) -> tuple[str, dict]:
    """The tool and the arguments our own parser reads from a printed command."""
    words = shlex.split(cmd)
    assert words[0] == program(), words
    spec = next(s for s in registry.TOOLS if s.command == words[1])
    values = tool_parser(spec).parse_all(words[2:])
    values.pop("as_json")
    return spec.name, {k: v for k, v in values.items() if v is not None}


@pytest.mark.parametrize("arguments", [
    {"run_id": "crun1", "component": "env-server", "level": "ERROR"},
    {"run_id": "a run with spaces", "search": "it's \"quoted\" $HOME `x`"},
    {"run_id": "-starts-with-a-dash", "search": "-also"},
    {"run_id": "r1", "env_name": "reverse-text", "tail_lines": 200},
])
def test_a_call_becomes_a_command_our_parser_reads_back_to_the_same_call(arguments):
    tool, values = parsed(command(call("mf_get_logs", **arguments)))
    assert tool == "mf_get_logs" and values == {k: str(v) for k, v in arguments.items()}


def test_list_arguments_repeat_their_option_and_booleans_are_flags():
    cmd = command(call("mf_summarize_logs", run_id="r1", components=["trainer", "orchestrator"]))
    assert parsed(cmd) == ("mf_summarize_logs", {"run_id": "r1", "components": ["trainer", "orchestrator"]})
    assert cmd.endswith("summarize-logs r1 --components trainer --components orchestrator")


def test_a_quoted_call_in_a_hint_becomes_its_command_in_backticks():
    logs = call("mf_get_logs", run_id="crun1", component="env-server")
    text = f"An env server crashes: read its errors with {logs}, then decide."
    assert for_people(text, [logs]) == f"An env server crashes: read its errors with `{command(logs)}`, then decide."
    assert "mf_" not in for_people(text, [logs])


def test_a_call_the_text_does_not_quote_is_added_and_bare_tool_names_become_command_names():
    runs = call("mf_list_runs")
    assert for_people("Check the id.", [runs]) == f"Check the id. Run `{command(runs)}`."
    # a tool needing no argument is a complete command; one needing a run id is only named
    assert for_people("See mf_list_launches or mf_get_run.") == \
        f"See `{program()} list-launches` or get-run."


# -- the program's name ------------------------------------------------------------------------


@pytest.fixture
def installation(tmp_path, monkeypatch):
    """A console script inside a virtual environment (``pyvenv.cfg`` beside its ``bin``), running."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    script = venv / "bin" / PROGRAM
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.setattr(sys, "argv", [str(script)])
    return script


def test_a_project_venv_on_path_is_not_a_persons_path_so_the_absolute_script_is_printed(installation):
    assert program({"PATH": f"{installation.parent}:/usr/bin:/bin"}) == str(installation)


def test_a_tool_install_the_persons_path_finds_is_named_bare(installation, tmp_path):
    bin_dir = tmp_path / "tool-bin"  # what uv tool install / pipx put on PATH: a symlink to the script
    bin_dir.mkdir()
    (bin_dir / PROGRAM).symlink_to(installation)
    assert program({"PATH": f"/usr/bin:{bin_dir}"}) == PROGRAM


def test_another_model_factory_first_on_path_means_the_absolute_script(installation, tmp_path):
    other = tmp_path / "other-bin"
    other.mkdir()
    (other / PROGRAM).write_text("#!/bin/sh\n")
    (other / PROGRAM).chmod(0o755)
    (tmp_path / "tool-bin").mkdir()
    (tmp_path / "tool-bin" / PROGRAM).symlink_to(installation)
    assert program({"PATH": f"{other}:{tmp_path / 'tool-bin'}"}) == str(installation)


def test_a_relative_path_entry_is_not_trusted(installation, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "here").mkdir()
    (tmp_path / "here" / PROGRAM).symlink_to(installation)
    assert program({"PATH": "here"}) == str(installation)


# -- layout --------------------------------------------------------------------------------------


def screen(width: int | None) -> terminal.Terminal:
    return terminal.Terminal(io.StringIO(), width, colour=False)


def test_wrapping_breaks_at_spaces_only_and_keeps_a_command_in_backticks_whole():
    text = ("Read the errors with `model-factory get-logs crun0123456789abcdefghij --component env-server` "
            "and /a/very/long/path/that/does/not/fit/in/forty/columns/at/all.toml then decide.")
    lines = terminal.wrap(text, 40)
    assert "`model-factory get-logs crun0123456789abcdefghij --component env-server`" in lines
    assert "/a/very/long/path/that/does/not/fit/in/forty/columns/at/all.toml" in " ".join(lines).split()
    assert all(len(line) <= 40 or len(terminal.words(line)) == 1 for line in lines)
    assert " ".join(lines).split() == text.split()


ROWS = [["crun0123456789abcdefghijk", "RUNNING", "PrimeIntellect/Qwen3-0.6B-Reverse-Text-SFT",
         "a long note about this run that is prose and may fold at spaces"],
        ["crun1", "FAILED", "Qwen/Qwen3-4B-Instruct-2507", "short"]]
COLUMNS = ["run_id", "status", "model", "note"]


def test_a_table_that_fits_is_aligned_and_no_line_ends_in_spaces():
    lines, dropped = terminal.table(COLUMNS, ROWS, screen(200))
    assert dropped == [] and len(lines) == 3 and all(line == line.rstrip() for line in lines)
    assert lines[1].index("RUNNING") == lines[2].index("FAILED") == lines[0].index("STATUS")


def test_a_narrow_table_folds_prose_then_drops_the_last_columns_never_an_id():
    lines, dropped = terminal.table(COLUMNS, ROWS, screen(100))
    assert dropped == [] and all(len(line) <= 100 for line in lines) and len(lines) > 3  # the note folded
    lines, dropped = terminal.table(COLUMNS, ROWS, screen(80))
    assert dropped == ["note"] and all(len(line) <= 80 for line in lines)
    assert any("crun0123456789abcdefghijk" in line for line in lines)


def test_a_table_too_narrow_for_its_first_columns_goes_vertical():
    lines, dropped = terminal.table(COLUMNS, ROWS, screen(30), keep=3)
    assert lines[:2] == ["run_id", "  crun0123456789abcdefghijk"] and "" in lines  # the id on a line of its own
    assert all(len(line) <= 30 or len(terminal.words(line)) == 1 for line in lines)


def test_piped_tables_and_facts_are_tab_separated_without_padding():
    lines, _ = terminal.table(COLUMNS, ROWS, screen(None))
    assert lines[0] == "\t".join(COLUMNS) and lines[2].split("\t") == ROWS[1]
    assert terminal.facts([("status", "RUNNING"), ("note", "two\nlines")], screen(None)) == \
        ["status\tRUNNING", "note\ttwo lines"]


def test_sizes_and_durations_read_as_people_say_them():
    assert [units.size(n) for n in (512, 12_300, 340_000_000, 1_234_000_000)] == \
        ["512 B", "12.3 kB", "340 MB", "1.2 GB"]
    assert [units.duration(s) for s in (45, 200, 7500)] == ["45 s", "3 min 20 s", "2 h 5 min"]


def test_no_color_and_pipes_get_no_escape_codes(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    read, write = os.openpty()
    with os.fdopen(write, "w") as tty:
        assert terminal.Terminal.of(tty).colour is False
    os.close(read)
    monkeypatch.delenv("NO_COLOR")
    assert terminal.Terminal.of(io.StringIO()).colour is False


def test_every_row_of_a_long_table_is_in_the_piped_output_and_fifty_on_a_terminal():
    from skill.render import MAX_ROWS, Table, View, show

    rows = [{"step": n, "status": "READY"} for n in range(120)]
    piped, err = screen(None), screen(None)
    show(View(tables=[Table("checkpoints", rows, ["step", "status"])]), piped, err)
    assert piped.stream.getvalue().splitlines() == ["step\tstatus", *(f"{n}\tREADY" for n in range(120))]
    tty, err = screen(80), screen(80)
    show(View(tables=[Table("checkpoints", rows, ["step", "status"])]), tty, err)
    assert len(tty.stream.getvalue().splitlines()) == MAX_ROWS + 2  # title, header, rows
    assert "70 more rows not shown" in err.stream.getvalue()


def test_in_prose_for_a_person_each_command_stands_bare_on_its_own_line_so_it_pastes_whole():
    cmd = "MODEL_FACTORY_STATE_DIR=/tmp/project/.model-factory model-factory approve plan_0123456789ab"
    lines = terminal.wrap(f"Next: Approve it in a terminal: `{cmd}` (it shows the plan again, then prints the "
                          "command that launches it).", 80, "  ", commands=True)
    assert lines[1] == cmd and "`" not in "".join(lines)
    assert lines[0] == "  Next: Approve it in a terminal:" and lines[2].startswith("  (it shows")
    assert all(len(line) <= 80 for line in lines if line != cmd)
    assert terminal.wrap(f"Run `{cmd}`.", None, commands=True) == [f"Run `{cmd}`."]  # piped: inline, one line


def test_a_parenthesis_opened_before_a_bare_command_is_still_closed_after_it():
    text = "Install it with `uv tool install prime==0.18.0` (for `prime train validate` and `prime volumes get`)."
    lines = terminal.wrap(text, 80, "  ", commands=True)
    assert lines == ["  Install it with", "uv tool install prime==0.18.0", "  (for", "prime train validate", "  and",
                     "prime volumes get", "  )."]
    # a parenthesis around the command alone is left out with it, on both sides
    assert terminal.wrap("Or (`a b` or `c d`) now.", 80, commands=True) == ["Or", "a b", "or", "c d", "now."]


def test_a_parenthesis_opened_earlier_on_the_line_closes_with_the_command_it_holds():
    # "(run `cmd`)" left "(run" above the command and ")." alone below it
    assert terminal.wrap("Fix it (run `model-factory preflight --json`).", 80, commands=True) == [
        "Fix it run", "model-factory preflight --json"]
    assert terminal.wrap("Plan again (see `model-factory plan-run a.toml`) and go.", 80, commands=True) == [
        "Plan again see", "model-factory plan-run a.toml", "and go."]
    # a "(" already closed on the line is kept
    assert terminal.wrap("A (b) c `x y` d", 80, commands=True) == ["A (b) c", "x y", "d"]


def test_the_preflight_hint_at_an_80_column_terminal_closes_its_parenthesis(emulator, mf_env, tmp_path):
    from _helpers import in_terminal

    env = {**mf_env, "PATH": str(tmp_path / "no-prime-here"), "TERM": "xterm", "NO_COLOR": "1"}
    _, text = in_terminal([sys.executable, "-m", "skill", "preflight"], env, tmp_path)
    hint = text[text.index("install the prime CLI with"):]
    assert "(for\n" in hint and hint.index(")", hint.index("prime volumes get")) > 0, text
    assert hint.count("(") == hint.count(")"), text


def test_a_preformatted_summary_wraps_under_its_labels_and_keeps_a_long_path_whole():
    path = "/tmp/" + "a-long-folder-name/" * 3 + "my-run.toml"
    lines = terminal.block([f"  Config:        {path} (sha256 2de85226b1a1, file 88479f60821d)",
                            "  Warnings:", "    - " + "word " * 30], 80)
    assert lines[0] == "  Config:" and lines[1].strip() == path and len(lines[1]) <= 80
    assert lines[2] == " " * 17 + "(sha256 2de85226b1a1, file 88479f60821d)"
    assert lines[3] == "  Warnings:" and lines[4].startswith("    - word") and lines[5].startswith("      word")
    assert all(len(line) <= 80 for line in lines)


def test_a_terminal_that_reports_no_width_is_read_as_80_columns():
    """A pseudo-terminal nobody sized (``script`` in a pipeline, some agent shells) reports 0 columns: that is
    an unknown width (80), not a 20-column terminal that puts one word on each line."""
    import pty
    import subprocess

    main, secondary = pty.openpty()  # never sized: 0 x 0
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    proc = subprocess.run([sys.executable, "-c", "import sys; from skill import terminal; "
                           "print(terminal.Terminal.of(sys.stdout).width, file=sys.stderr)"],
                          stdout=secondary, stderr=subprocess.PIPE, env=env, text=True, timeout=60)
    os.close(secondary)
    os.close(main)
    assert proc.returncode == 0 and proc.stderr.strip() == str(terminal.DEFAULT_COLUMNS) == "80", proc.stderr
