"""Inputs no tool may choke on: a number JSON cannot carry anywhere in a config (``nan``, ``inf``,
``1e309``), step caps outside the bounds of plan-run's ``max_steps`` (in the file as for the flag),
and a config file name holding an escape character (escaped at the terminal, cleaned out of the
run name). Real example configs, the real snapshot schema, the registry and the CLI in-process.
"""

from __future__ import annotations

import subprocess

import pytest
from _helpers import EXAMPLE, call, err, ok

from skill import cli, registry
from skill.render import command
from tools.core import MAX_STEPS
from tools.errors import Call
from tools.guardrails.text import shown

TEXT = EXAMPLE.read_text()
NON_FINITE = ["nan", "+nan", "inf", "-inf", "1e309", "-1.8e309"]


def config(tmp_path, text: str, name: str = "c.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


# -- 9. no number JSON cannot carry --------------------------------------------------------------


PLACES = {
    "trainer.optim.lr": lambda t, v: t.replace("lr = 3e-6", f"lr = {v}"),  # a schema field
    "orchestrator.train.sampling.temperature":
        lambda t, v: t.replace("max_completion_tokens = 128", f"max_completion_tokens = 128\ntemperature = {v}"),
    "orchestrator.train.source[0].env.taskset.weights[1]":  # inside an array, inside an env table
        lambda t, v: t.replace('id = "reverse-text"', f'id = "reverse-text"\nweights = [1.0, {v}]'),
    "seconds_per_step_guess": lambda t, v: f"seconds_per_step_guess = {v}\n" + t,  # a key no schema knows
}
#: Every value at the schema field, and one value at every other place.
FINITE_CASES = [("trainer.optim.lr", v) for v in NON_FINITE] + [(w, "nan") for w in list(PLACES)[1:]]


@pytest.mark.parametrize(("where", "value"), FINITE_CASES)
def test_a_number_json_cannot_carry_is_a_validation_error_at_its_key(frozen_ctx, tmp_path, where, value):
    edit = PLACES[where]
    path = config(tmp_path, edit(TEXT, value))
    report = ok(call(frozen_ctx, "mf_validate_config", config_path=str(path)))
    assert not report.valid and where in [e.path for e in report.errors if e.rule == "finite_number"]
    planned = err(call(frozen_ctx, "mf_plan_run", config_path=str(path), team="personal"), "invalid_config")
    assert where in [f.path for f in planned.fields]


@pytest.mark.parametrize("value", ["nan", "1e309"])
def test_no_tool_returns_internal_error_for_a_non_finite_config(frozen_ctx, tmp_path, value):
    path = config(tmp_path, TEXT.replace("lr = 3e-6", f"lr = {value}"))
    for tool, arguments in (("mf_validate_config", {"config_path": str(path), "schema": "structural"}),
                            ("mf_plan_run", {"config_path": str(path), "team": "personal", "run_kind": "full"}),
                            ("mf_plan_run", {"config_path": str(path), "team": "personal", "max_steps": 5})):
        answer = call(frozen_ctx, tool, **arguments)
        assert getattr(answer, "code", None) != "internal_error", answer


# -- 10. the same step bounds for the file as for the flag ---------------------------------------


@pytest.mark.parametrize(("key", "steps"), [
    *[("max_steps", v) for v in ("-1", "0", "99999999999999999999999", str(MAX_STEPS + 1))],
    ("trainer.max_steps", "-1"), ("orchestrator.max_steps", "99999999999999999999999")])
def test_a_step_cap_outside_the_flags_bounds_is_refused_in_the_file(frozen_ctx, emulator, tmp_path, key, steps):
    if key == "max_steps":
        text = TEXT.replace("max_steps = 20", f"max_steps = {steps}")
    else:
        table = key.split(".")[0]
        text = TEXT.replace(f"[{table}]\n", f"[{table}]\nmax_steps = {steps}\n", 1) if table == "orchestrator" \
            else TEXT.replace("[trainer.optim]", f"[trainer]\nmax_steps = {steps}\n\n[trainer.optim]")
    path = config(tmp_path, text)
    report = ok(call(frozen_ctx, "mf_validate_config", config_path=str(path)))
    assert key in [e.path for e in report.errors if e.rule == "step_cap"]
    for run_kind in ("full", "smoke"):
        refused = err(call(frozen_ctx, "mf_plan_run", config_path=str(path), team="personal", run_kind=run_kind),
                      "invalid_config")
        assert "$" not in refused.message  # no cost of 10^21 steps reaches anyone
    flag = call(frozen_ctx, "mf_plan_run", config_path=str(EXAMPLE), team="personal", max_steps=int(steps))
    assert flag.code == "bad_arguments"  # the flag refuses the same values
    assert not emulator.state.runs


def test_the_bounds_themselves_are_accepted_in_the_file_and_by_the_flag(frozen_ctx, tmp_path):
    for steps in (1, MAX_STEPS):
        path = config(tmp_path, TEXT.replace("max_steps = 20", f"max_steps = {steps}"), f"s{steps}.toml")
        assert ok(call(frozen_ctx, "mf_plan_run", config_path=str(path), team="personal", run_kind="full")).max_steps \
            == steps
        assert ok(call(frozen_ctx, "mf_plan_run", config_path=str(EXAMPLE), team="personal",
                       max_steps=steps)).max_steps == steps


# -- 11. a file name with an escape character ------------------------------------------------------

ODD_NAMES = ["evil\x1b[31mred\x07.toml", "two\nlines.toml", "bidi\u202egnp.toml", "tab\there.toml"]


@pytest.mark.parametrize("name", ODD_NAMES)
def test_a_run_name_from_a_file_name_is_cleaned_and_the_path_is_sent_nowhere(frozen_ctx, tmp_path, name):
    path = config(tmp_path, TEXT.replace('[model]', '[model]', 1), name)
    plan = ok(call(frozen_ctx, "mf_plan_run", config_path=str(path), team="personal"))
    base = plan.run_name.rsplit("-mf", 1)[0]
    assert base.isascii() and base.isprintable() and all(ch.isalnum() or ch in "._-" for ch in base), base
    assert "\x1b" not in plan.summary and "\u202e" not in plan.summary  # the summary escapes the path


@pytest.mark.parametrize("name", ODD_NAMES)
@pytest.mark.parametrize("argv", [["validate-config", "{path}"], ["prepare-config", "basic/reverse-text/rl", "{path}"],
                                  ["plan-run", "{path}", "--team", "personal"], ["get-run", "{name}"]])
def test_a_file_name_with_control_characters_reaches_the_terminal_escaped(frozen_ctx, tmp_path, monkeypatch, capsys,
                                                                           name, argv):
    for key, value in frozen_ctx.env.items():
        monkeypatch.setenv(key, value)
    path = tmp_path / "out" / name
    path.parent.mkdir()
    if argv[0] != "prepare-config":
        path.write_text(TEXT)
    with pytest.raises(SystemExit):
        cli.main([a.format(path=path, name=name) for a in argv])
    out = capsys.readouterr()
    printed = out.out + out.err
    assert not any(ch in printed for ch in "\x1b\x07\u202e" if ch in name), argv  # (tabs: the piped rows' own)
    assert shown(name.removesuffix(".toml")) in printed and name.removesuffix(".toml") not in printed, argv


@pytest.mark.parametrize("name", ODD_NAMES)
def test_a_printed_command_with_such_a_path_names_the_same_file_when_pasted(tmp_path, name):
    path = tmp_path / name
    path.write_text("x")
    pasted = command(Call(tool="mf_validate_config", arguments={"config_path": str(path)}))
    words = pasted.split(" validate-config ", 1)[1]
    assert words.isprintable() and words.startswith("$'")
    shown = subprocess.run(["bash", "-c", f"printf '%s' {words}"], capture_output=True, timeout=30)
    assert shown.stdout.decode() == str(path)


def test_the_mcp_and_json_surfaces_keep_the_path_as_it_is(frozen_ctx, tmp_path):
    path = config(tmp_path, TEXT, ODD_NAMES[0])
    report = registry.call_tool("mf_validate_config", {"config_path": str(path)}, frozen_ctx)
    assert report.config_path == str(path)  # data for agents is exact; only the terminal escapes it
