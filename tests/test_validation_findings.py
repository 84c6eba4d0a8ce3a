"""Findings people can act on: key path, line and column, the key meant, a fix, no secret echoed;
the other TOML reader; remembered verdicts; the validate-config command.

Real files in tmp folders, mf_validate_config with the shipped snapshot (tests/test_schema_real.py
runs the real schema, tests/test_schema_prime.py ``prime train validate``).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from _helpers import mf
from _schema_env import example, validate_table, write_config

from skill.registry import call_tool
from tools.configs import EXAMPLES_DIR, ValidateConfigResult, Verdict, VerdictCache, key_positions
from tools.core import Context

ROOT = Path(__file__).resolve().parent.parent
FAKE_HF = "hf_FAKEfakeFAKEfakeFAKEfakeFAKEfake0000"  # fake token shape, not a real token


def validate_text(text: str, ctx: Context, name: str = "config.toml", **arguments: object) -> ValidateConfigResult:
    path = (ctx.cwd or Path.cwd()) / name
    path.write_text(text)
    result = call_tool("mf_validate_config", {"config_path": str(path), "schema": "snapshot", **arguments}, ctx)
    assert isinstance(result, ValidateConfigResult), result
    return result


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


# --- where: key path, line, column --------------------------------------------------------------


def test_an_error_names_the_line_and_column_of_its_key(schema_ctx: Context) -> None:
    text = (EXAMPLES_DIR / "basic/reverse-text/rl.toml").read_text().replace("batch_size = 128", "batch_size = 100")
    report = validate_text(text, schema_ctx)
    error = report.errors[0]
    assert error.path == "orchestrator" and error.line == line_of(text, "[orchestrator]") and error.column == 1
    typed = text.replace("lr = 3e-6", 'lr = "fast"')
    error = validate_text(typed, schema_ctx, name="typed.toml").errors[0]
    assert (error.path, error.line) == ("trainer.optim.lr", line_of(typed, 'lr = "fast"'))
    assert error.column == 1 and error.fix.startswith("Give trainer.optim.lr a value")


def test_keys_inside_inline_tables_and_arrays_of_tables_have_positions() -> None:
    text = ('a = 1\n[x.y]\nz = { b = [1, {c = 2}], "d.e" = 3 }\n[[s]]\nn = 1\n[s.env]\nq = """\nmulti\n"""\n'
            '[[s]]\nn = 2\n[[s.sub]]\nk = 1\n')
    found = key_positions(text)
    assert found[("x", "y", "z", "b", 1, "c")] == (3, 16) and found[("x", "y", "z", "d.e")] == (3, 25)
    assert found[("s", 0, "env", "q")] == (7, 1) and found[("s", 1, "n")] == (11, 1)
    assert found[("s", 1, "sub", 0, "k")] == (13, 1) and ("multi",) not in found


def test_every_key_of_every_bundled_example_has_a_position() -> None:
    import tomllib

    def leaves(node: object, path: tuple = ()) -> list[tuple]:
        if isinstance(node, dict):
            return [p for k, v in node.items() for p in leaves(v, (*path, k))]
        if isinstance(node, list):
            return [p for i, v in enumerate(node) for p in leaves(v, (*path, i))]
        return [path]

    for toml in sorted(EXAMPLES_DIR.rglob("*.toml")):
        text = toml.read_text()
        found = key_positions(text)
        assert [p for p in leaves(tomllib.loads(text)) if p not in found] == [], toml


def test_a_value_filled_in_from_a_shared_key_points_at_the_shared_key(schema_ctx: Context) -> None:
    report = validate_table(example("basic/reverse-text/rl") | {"max_steps": 20.5}, schema_ctx)
    assert report.errors[0].path == "trainer.max_steps" and report.errors[0].line == 1


def test_a_validator_refusing_the_whole_file_points_at_the_key_its_message_names(schema_ctx: Context) -> None:
    config = example("advanced/qwen3-30b-a3b/math")
    config["deployment"]["nodes_per_fsdp_group"] = 3
    path = write_config(config, schema_ctx.cwd)
    report = validate_table(config, schema_ctx)
    error = report.errors[0]
    assert error.path == "" and "deployment.nodes_per_fsdp_group (3)" in error.message
    assert error.line == line_of(path.read_text(), "num_train_nodes")  # the first key the message names


# --- what: the key meant, the replacement, the fix ------------------------------------------------


@pytest.mark.parametrize(("where", "key", "meant", "fix"), [
    ("orchestrator", "batchsize", "did you mean 'batch_size'?", "Rename batchsize to batch_size in [orchestrator]."),
    ("ckpt", "intervall", "did you mean 'interval'?", "Rename intervall to interval in [ckpt]."),
    ("orchestrator", "lr", "'lr' belongs in [trainer.optim]", "Move lr from [orchestrator] to [trainer.optim]."),
    ("trainer.model.lora", "ranks", "did you mean 'rank'?", "Rename ranks to rank in [trainer.model.lora]."),
])
def test_an_unknown_key_gets_the_key_meant_and_where_it_belongs(where: str, key: str, meant: str, fix: str,
                                                                schema_ctx: Context) -> None:
    config = example("basic/alphabet-sort/rl")
    node = config
    for part in where.split("."):
        node = node.setdefault(part, {})
    node[key] = 1
    report = validate_table(config, schema_ctx)
    error = report.errors[0]
    assert error.path == f"{where}.{key}" and meant in error.message and error.fix == fix and error.line


def test_an_sft_key_in_the_wrong_table_names_the_sft_section(schema_ctx: Context) -> None:
    config = example("basic/wordle/sft")
    config["data"]["lr"] = 1e-5
    error = validate_table(config, schema_ctx).errors[0]
    assert "'lr' belongs in [optim]" in error.message and error.fix == "Move lr from [data] to [optim]."


def test_a_key_of_an_older_format_names_its_replacement(schema_ctx: Context) -> None:
    config = example("basic/reverse-text/rl")
    config["orchestrator"]["rollouts_per_example"] = 16
    error = validate_table(config, schema_ctx).errors[0]
    assert "use orchestrator.group_size" in error.message
    assert error.fix == "Replace orchestrator.rollouts_per_example with orchestrator.group_size."


def test_a_top_level_eval_in_rl_names_orchestrator_eval(schema_ctx: Context) -> None:
    config = example("basic/reverse-text/rl") | {"eval": {"interval": 10}}
    error = validate_table(config, schema_ctx).errors[0]
    assert error.path == "eval" and "[orchestrator.eval]" in error.message


def test_every_issue_of_a_broken_config_has_a_fix_that_starts_with_a_verb(schema_ctx: Context) -> None:
    config = example("basic/hendrycks-sanity/rl") | {"clean": True, "my_key": 1}
    config["trainer"]["model"] = {"cp": 2, "impl": "hf"}
    config["orchestrator"]["batch_size"] = "many"
    report = validate_table(config, schema_ctx)
    assert len(report.errors) >= 3
    for issue in [*report.errors, *report.warnings]:
        assert issue.fix and issue.fix.split()[0][0].isupper() and issue.fix.split()[0].isalpha(), issue


# --- no secret echoed -----------------------------------------------------------------------------


def test_a_secret_in_a_field_the_schema_refuses_is_never_echoed(schema_ctx: Context) -> None:
    config = example("basic/reverse-text/rl")
    config.setdefault("deployment", {})["type"] = FAKE_HF  # the discriminator message would quote the tag
    config["env_vars"] = {"MY_SERVICE_PASSWORD": "correct-horse-battery-staple"}  # fake, no known shape
    config["trainer"]["optim"]["lr"] = "correct-horse-battery-staple"
    report = validate_table(config, schema_ctx)
    dumped = report.model_dump_json()
    assert FAKE_HF not in dumped and "correct-horse-battery-staple" not in dumped
    assert {"deployment", "env_vars.MY_SERVICE_PASSWORD"} <= {e.path for e in report.errors}
    assert any("REDACTED" in e.message for e in report.errors)


# --- the other TOML reader -------------------------------------------------------------------------


def test_a_dotted_key_with_a_multi_line_string_is_read_differently_by_prime_train(schema_ctx: Context) -> None:
    text = 'run.name = """reverse\ntext"""\n' + (EXAMPLES_DIR / "basic/reverse-text/rl.toml").read_text()
    report = validate_text(text, schema_ctx)
    [warning] = [w for w in report.warnings if w.rule == "toml_reading"]
    assert warning.path == "run.name" and warning.line == line_of(text, "run.name")
    assert "toml package 0.10" in warning.message and "reads name instead" in warning.message


def test_a_mixed_type_array_is_refused_by_prime_train_and_named(schema_ctx: Context) -> None:
    config = example("basic/reverse-text/rl")
    config["monitors"]["wandb"]["tags"] = ["smoke", 1]
    report = validate_table(config, schema_ctx)
    warning = next(w for w in report.warnings if w.rule == "toml_reading")
    assert warning.path == "monitors.wandb.tags" and "refuses this file" in warning.message
    assert "Invalid TOML" in warning.message and warning.fix


def test_files_both_readers_agree_on_get_no_such_warning(schema_ctx: Context) -> None:
    for toml in sorted(EXAMPLES_DIR.rglob("*.toml")):
        report = validate_text(toml.read_text(), schema_ctx)
        assert "toml_reading" not in {w.rule for w in report.warnings}, toml


# --- remembered verdicts ----------------------------------------------------------------------------


def test_a_second_check_of_the_same_config_is_remembered_and_a_change_is_not(schema_ctx: Context) -> None:
    config = example("basic/wordle/rl") | {"max_steps": 31337}  # no other test checks this one
    first = validate_table(config, schema_ctx)
    again = validate_table(config, schema_ctx)
    assert not first.schema_cached and again.schema_cached and again.errors == first.errors
    other_mode = validate_table(config, schema_ctx, mode="sft")
    assert not other_mode.schema_cached and not other_mode.valid


def test_the_disk_cache_is_bounded_and_keeps_the_newest(tmp_path: Path) -> None:
    cache = VerdictCache(tmp_path, disk_entries=3, memory=False)
    for n in range(3):
        cache.put(f"{n:064x}", Verdict("snapshot", "rl", schema_commit="c" * 40))
        os.utime(tmp_path / f"{n:064x}.json", (1000 + n, 1000 + n))
    cache.put(f"{3:064x}", Verdict("snapshot", "rl"))
    assert sorted(p.stem[-1] for p in tmp_path.glob("*.json")) == ["1", "2", "3"]
    assert cache.get(f"{2:064x}").schema_commit == "c" * 40 and cache.get(f"{0:064x}") is None
    assert not list(tmp_path.glob(".*"))  # no temporary file left behind


def test_a_damaged_cache_file_is_a_miss_and_is_removed(tmp_path: Path) -> None:
    cache = VerdictCache(tmp_path, memory=False)
    (tmp_path / f"{7:064x}.json").write_text('{"backend": "snapshot", "mode"')
    assert cache.get(f"{7:064x}") is None and not (tmp_path / f"{7:064x}.json").exists()


def model_factory(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return mf(*args, env=env, cwd=ROOT)


def test_validate_config_command_reports_the_back_end_and_later_processes_reuse_the_verdict(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "MODEL_FACTORY_STATE_DIR": str(tmp_path / "state")}
    config = write_config(example("basic/reverse-text/rl") | {"max_steps": 4242}, tmp_path)
    first = model_factory("validate-config", str(config), "--schema", "snapshot", "--json", env=env)
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert report["schema_check"] == "snapshot" and report["schema_commit"].startswith("559b447")
    assert report["schema_cached"] is False and list((tmp_path / "state" / "validation-cache").glob("*.json"))
    second = json.loads(model_factory("validate-config", str(config), "--schema", "snapshot", "--json",
                                      env=env).stdout)
    assert second["schema_cached"] is True and second["errors"] == report["errors"]
    broken = write_config(example("basic/reverse-text/rl") | {"clean": True}, tmp_path, "broken.toml")
    refused = model_factory("validate-config", str(broken), "--schema", "snapshot", "--json", env=env)
    assert refused.returncode == 1 and json.loads(refused.stdout)["errors"][0]["rule"] == "clean"
    wrong = model_factory("validate-config", str(config), "--schema", "pydantic", env=env)
    assert wrong.returncode == 2 and "auto" in wrong.stderr



def test_schema_prime_without_the_prime_cli_falls_back_to_the_snapshot_and_says_how_to_get_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    ctx = Context(env={"HOME": str(home), "PATH": str(tmp_path / "empty")}, home=home, cwd=tmp_path,
                  state_dir=tmp_path / "state")
    report = validate_table(example("basic/reverse-text/rl"), ctx, schema="prime")
    assert (report.schema_check, report.fallback_from, report.valid) == ("snapshot", "prime", True)
    [warning] = [w for w in report.warnings if w.rule.startswith("backend:")]
    assert warning.rule == "backend:prime_not_found" and "uv tool install prime" in warning.message
