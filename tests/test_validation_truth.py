"""Validation that tells the truth: a verdict no schema reached is never a pass, cross-field
rejections name the keys and numbers they compare, a missing taskset switches off only the
checks that need it, unknown ids are named, SFT online-eval blocks are checked, and the real
back-end never judges with a schema the checkout no longer has.

Real files in tmp folders, mf_validate_config through the registry (as every surface calls it);
the real schema from the fixture's environment (tests/_schema_env.py) and a real git checkout
copied from ../shared/fixtures/prime-rl-schema.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest
from _helpers import EXAMPLE, call, cli, cli_json, err, mf_json, unavailable
from _schema_env import example, write_config

from skill.registry import call_tool
from tests._conformance import envs
from tools.configs import ValidateConfigResult
from tools.core import STATE_DIR_ENV, Context

pytest_plugins = ["_schema_env"]


def validate(ctx: Context, path: Path, **arguments: object) -> ValidateConfigResult:
    result = call_tool("mf_validate_config", {"config_path": str(path), **arguments}, ctx)
    assert isinstance(result, ValidateConfigResult), result
    return result


# --- 17. a structural verdict (no schema judged the file) is never valid: true ---------------------


@pytest.fixture
def broken_snapshot(monkeypatch: pytest.MonkeyPatch) -> None:
    """The snapshot itself fails (a defect here, not in the config; injected where the back-ends load
    it): only our rules can run."""

    def fail(mode: str) -> None:
        raise RuntimeError("snapshot unreadable")

    monkeypatch.setattr("tools.configs._schema_backends.snapshot_schema", fail)
    # verdicts this process already remembers (an earlier test judged the same bytes) are set aside
    monkeypatch.setattr("tools.configs._schema_cache._memory", OrderedDict())


def test_a_file_no_schema_judged_is_not_valid_but_null(broken_snapshot: None, schema_ctx: Context,
                                                       tmp_path: Path) -> None:
    path = tmp_path / "rl.toml"
    path.write_text(EXAMPLE.read_text().replace("batch_size = 128", "batch_size = 100")  # the schema rejects it
                    .replace("max_steps = 20", "max_steps = 19"))  # a config no other test had remembered
    report = validate(schema_ctx, path, schema="snapshot")
    assert report.schema_check == "structural" and report.valid is None and report.errors == []
    assert "not judged by a schema" in report.schema_note.lower()
    assert any(w.rule == "backend:internal" for w in report.warnings)


def test_our_own_errors_still_make_a_structural_verdict_false(broken_snapshot: None, schema_ctx: Context,
                                                             tmp_path: Path) -> None:
    path = tmp_path / "rl.toml"
    path.write_text(EXAMPLE.read_text().replace("max_steps = 20", "max_steps = -1"))  # our step cap rule
    report = validate(schema_ctx, path, schema="snapshot")
    assert report.schema_check == "structural" and report.valid is False


def test_the_cli_exits_1_and_plan_refuses_a_file_no_schema_judged(broken_snapshot: None, frozen_ctx: Context,
                                                                   tmp_path: Path) -> None:
    path = tmp_path / "rl.toml"
    path.write_text(EXAMPLE.read_text().replace("max_steps = 20", "max_steps = 18"))  # not remembered elsewhere
    env = {**frozen_ctx.env, "HOME": str(tmp_path)}
    code, body = cli_json("validate-config", path, "--schema", "snapshot", env=env, cwd=tmp_path)
    assert code == 1 and body["valid"] is None
    person = cli("validate-config", path, "--schema", "snapshot", env=env, cwd=tmp_path)
    assert person.returncode == 1 and "not judged by a schema" in person.stderr + person.stdout
    assert "plan-run" not in person.stderr + person.stdout
    refused = err(call(frozen_ctx, "mf_plan_run", config_path=str(path), team="personal"), "invalid_config")
    assert "not judged by a schema" in refused.message and "schema=" in refused.fix.replace(" ", "")


# --- 12. the real back-end never judges with a schema the checkout no longer has -------------------

RL_PY = Path("packages/prime-rl-configs/src/prime_rl/configs/rl.py")
CLEAN = "    clean: bool = False\n"


@pytest.fixture
def real_checkout(tmp_path: Path, schema_python: Path) -> Path:
    """A git checkout of the fixture's prime-rl sources (copied verbatim, then committed) whose
    ``.venv`` imports prime_rl.configs from the checkout's working tree (its other packages from
    the fixture's schema environment), as an editable ``uv sync`` install does."""
    if shutil.which("uv") is None or shutil.which("git") is None:
        unavailable("needs uv and git", "MF_REQUIRE_SCHEMA")
    root = tmp_path / "prime-rl"
    shutil.copytree(envs.fixture_dir() / "prime-rl", root)
    for path in root.rglob("*"):
        path.chmod(path.stat().st_mode | 0o200)
    (root / "pyproject.toml").write_text('[project]\nname = "prime-rl"\nversion = "0"\nrequires-python = ">=3.12"\n')
    subprocess.run([str(schema_python), "-m", "venv", "--without-pip", str(root / ".venv")], check=True)
    [site] = (root / ".venv" / "lib").glob("python3.12/site-packages")
    schema_site = next(schema_python.parent.parent.glob("lib/python3.12/site-packages"))
    (site / "checkout.pth").write_text(f"{root / 'packages/prime-rl-configs/src'}\n"
                                       f"import site; site.addsitedir({str(schema_site)!r})\n")
    git(root, "init", "-q")
    git(root, "add", "pyproject.toml", "packages", "LICENSE")
    git(root, "commit", "-qm", "prime-rl at the fixture's commit")
    return root


def git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), "-c", "user.email=tests@example.invalid", "-c",
                           "user.name=tests", *args], check=True, capture_output=True, text=True)
    return done.stdout.strip()


def edit_rl(root: Path, field: str | None) -> None:
    """RLConfig with one more required field (``field``), or as the fixture has it (None)."""
    text = (envs.fixture_dir() / "prime-rl" / RL_PY).read_text()
    (root / RL_PY).write_text(text.replace(CLEAN, f"{CLEAN}\n    {field}: int\n") if field else text)


def test_a_long_running_process_sees_a_changed_checkout_and_never_caches_the_old_verdict(
        real_checkout: Path, schema_ctx: Context, tmp_path: Path) -> None:
    root = real_checkout
    ctx = Context(env={**schema_ctx.env, "HOME": os.environ.get("HOME", "")}, home=schema_ctx.home,
                  cwd=schema_ctx.cwd, state_dir=schema_ctx.state_dir)  # uv finds its cache in the real HOME
    config = write_config(example("basic/reverse-text/rl"), tmp_path)
    first = validate(ctx, config, schema="real", prime_rl_dir=str(root))
    assert first.valid is True and first.schema_commit == git(root, "rev-parse", "HEAD")

    edit_rl(root, "review_ticket")  # the user commits a new required field
    git(root, "commit", "-qam", "RLConfig needs a review ticket")
    head = git(root, "rev-parse", "HEAD")
    second = validate(ctx, config, schema="real", prime_rl_dir=str(root))
    assert second.schema_commit == head and not second.schema_cached
    assert second.valid is False and "review_ticket" in [e.path for e in second.errors]

    # a fresh process reads the verdict the long-running one wrote under the new commit
    code, body = mf_json("validate-config", config, "--schema", "real", "--prime-rl-dir", root,
                         env={**ctx.env, STATE_DIR_ENV: str(ctx.state_dir)}, cwd=tmp_path)
    assert code == 1 and body["schema_commit"] == head and body["schema_cached"] is True, body
    assert "review_ticket" in [e["path"] for e in body["errors"]]

    edit_rl(root, None)  # uncommitted edits count too, each one
    undone = validate(ctx, config, schema="real", prime_rl_dir=str(root))
    assert undone.valid is True and "uncommitted changes" in undone.schema_source
    edit_rl(root, "audit_id")
    other = validate(ctx, config, schema="real", prime_rl_dir=str(root))
    assert other.valid is False and "audit_id" in [e.path for e in other.errors]


# --- 16. a cross-field rejection names the key paths it compares and their numbers ------------------




@pytest.mark.parametrize("schema", ["snapshot", "real"])
def test_a_batch_size_that_is_no_multiple_names_both_keys_and_numbers(schema: str, real_schema_ctx: Context,
                                                                      tmp_path: Path) -> None:
    text = EXAMPLE.read_text().replace("batch_size = 128", "batch_size = 48").replace(
        "group_size = 16", "group_size = 5")
    path = tmp_path / f"{schema}.toml"
    path.write_text(text)
    report = validate(real_schema_ctx, path, schema=schema)
    assert report.schema_check == schema
    [error] = report.errors
    assert "orchestrator.batch_size 48 is not a multiple of orchestrator.group_size 5" in error.message
    assert "orchestrator.batch_size or orchestrator.group_size" in error.fix
    assert "the message names" not in error.fix


@pytest.mark.parametrize("schema", ["snapshot", "real"])
def test_a_whole_file_rejection_names_the_keys_of_both_tables(schema: str, real_schema_ctx: Context,
                                                              tmp_path: Path) -> None:
    table = example("basic/reverse-text/rl")
    del table["seq_len"]
    table["orchestrator"]["seq_len"] = 8192
    table["trainer"].setdefault("model", {})["seq_len"] = 4096
    path = write_config(table, tmp_path, f"{schema}.toml")
    [error] = validate(real_schema_ctx, path, schema=schema).errors
    assert error.path == ""  # where prime-rl puts it: RLConfig's own validator
    assert "orchestrator.seq_len = 8192" in error.message and "trainer.model.seq_len = 4096" in error.message
    assert "orchestrator.seq_len" in error.fix and "trainer.model.seq_len" in error.fix


def test_a_value_left_to_its_default_or_filled_from_a_shared_key_says_so(schema_ctx: Context,
                                                                         tmp_path: Path) -> None:
    text = EXAMPLE.read_text().replace("batch_size = 128\n", "").replace("group_size = 16", "group_size = 3")
    path = tmp_path / "rl.toml"
    path.write_text(text)
    [error] = validate(schema_ctx, path, schema="snapshot").errors
    assert "orchestrator.group_size = 3" in error.message and "orchestrator.batch_size" in error.message
    text = EXAMPLE.read_text().replace("[trainer.optim]", "[trainer.scheduler]\ntype = \"linear\"\nwarmup_steps = 10\n"
                                       "decay_steps = 15\n\n[trainer.optim]")
    path.write_text(text)
    [error] = validate(schema_ctx, path, schema="snapshot").errors
    assert "trainer.max_steps = 20 (from max_steps)" in error.message
    assert "trainer.model.attn = 'auto' (default)" in validate(schema_ctx, rt_hf(tmp_path), schema="snapshot"
                                                               ).errors[0].message


def rt_hf(tmp_path: Path) -> Path:
    """reverse-text with the HF implementation and attention left to its default (flash attention 4 on auto)."""
    path = tmp_path / "hf.toml"
    path.write_text(EXAMPLE.read_text().replace("[trainer.optim]", "[trainer.model]\nimpl = \"hf\"\n\n[trainer.optim]"))
    return path


def test_values_of_environment_variables_are_never_shown(schema_ctx: Context, tmp_path: Path) -> None:
    text = EXAMPLE.read_text() + '\n[env_vars]\nCUDA_VISIBLE_DEVICES = "0,1-visible-value"\n'
    path = tmp_path / "rl.toml"
    path.write_text(text)
    [error] = validate(schema_ctx, path, schema="snapshot").errors
    assert "env_vars" in error.message and "visible-value" not in error.message + (error.fix or "")


# --- 13. a taskset the interpreter lacks switches off only the checks that need it ------------------

HS = "basic/hendrycks-sanity/rl"  # math-env and aime24: tasksets the fixture's schema environment does not have


def test_an_unimportable_taskset_is_named_and_the_rest_of_the_sources_still_checked(real_schema_ctx: Context,
                                                                                   tmp_path: Path) -> None:
    report = validate(real_schema_ctx, write_config(example(HS), tmp_path, "hs.toml"), schema="real")
    assert report.schema_check == "real" and report.valid is True
    [note] = [n for n in report.notes if "not installed" in n]
    assert "'math-env'" in note and "'aime24'" in note and "every other check" in note


@pytest.mark.parametrize(("edit", "expected"), [
    (lambda t: t["orchestrator"]["eval"].pop("source"), "must define at least one source"),
    (lambda t: t["orchestrator"]["eval"]["source"].append(dict(t["orchestrator"]["eval"]["source"][0])),
     "Duplicate evaluation environment names"),
    (lambda t: t["orchestrator"]["train"]["source"][0].update(name="agg"), 'name "agg" is reserved'),
])
def test_checks_that_need_no_taskset_still_run_when_one_is_missing(edit: Any, expected: str,
                                                                   real_schema_ctx: Context, tmp_path: Path) -> None:
    table = example(HS)
    edit(table)
    report = validate(real_schema_ctx, write_config(table, tmp_path, "hs.toml"), schema="real")
    assert report.schema_check == "real" and report.valid is False
    assert expected in report.errors[0].message and "checked when the run starts" in report.errors[0].message


# --- 15. a taskset or harness id the schema commit knows nothing of is named --------------------------


def with_env(tmp_path: Path, taskset: str, harness: str | None = None) -> Path:
    table = example("basic/reverse-text/rl")
    env = table["orchestrator"]["train"]["source"][0]["env"]
    env["taskset"]["id"] = taskset
    if harness is not None:
        env["agent"] = {"harness": {"id": harness}}
    return write_config(table, tmp_path, "ids.toml")


def test_an_unknown_taskset_or_harness_id_is_a_warning_at_its_key(schema_ctx: Context, tmp_path: Path) -> None:
    report = validate(schema_ctx, with_env(tmp_path, "revers-text", harness="bsh"), schema="snapshot")
    assert report.valid is True  # a private environment is allowed
    named = {w.path: w for w in report.warnings if w.rule == "unknown_plugin_id"}
    assert set(named) == {"orchestrator.train.source[0].env.taskset.id",
                          "orchestrator.train.source[0].env.agent.harness.id"}
    taskset = named["orchestrator.train.source[0].env.taskset.id"]
    assert "'revers-text' is not known to prime-rl 559b447" in taskset.message and taskset.line and taskset.fix


@pytest.mark.parametrize("taskset", ["math-env", "harbor", "PrimeIntellect/reverse-text@0.1.2", "Wiki_Search"])
def test_ids_the_commit_knows_are_not_named(taskset: str, schema_ctx: Context, tmp_path: Path) -> None:
    report = validate(schema_ctx, with_env(tmp_path, taskset, harness="terminus_2"), schema="snapshot")
    assert [w.path for w in report.warnings if w.rule == "unknown_plugin_id"] == []


# --- 14. SFT online-eval blocks are checked as the platform checks them on submission ----------------

SFT = "basic/reverse-text/sft"


@pytest.mark.parametrize("schema", ["snapshot", "real"])
@pytest.mark.parametrize(("edit", "path", "expected"), [
    (lambda t: t["eval"].setdefault("client", {}).update(base_url="http://localhost:9999/v1"), "",
     "eval.client.base_url port (9999) does not match inference.server.port (8000)"),
    (lambda t: t.pop("eval"), "", "[inference] is only used for online evals"),
    (lambda t: t.update(weight_broadcast={"type": "nixl"}), "", "NIXL weight broadcast is not supported"),
])
def test_sft_online_eval_blocks_are_checked_with_sftconfig(schema: str, edit: Any, path: str, expected: str,
                                                           real_schema_ctx: Context, tmp_path: Path) -> None:
    table = example(SFT)
    edit(table)
    report = validate(real_schema_ctx, write_config(table, tmp_path, f"{schema}.toml"), schema=schema, mode="sft")
    assert report.schema_check == schema and report.valid is False
    [error] = report.errors
    assert error.path == path and expected in error.message and "checked when the run is submitted" in error.message


@pytest.mark.parametrize("schema", ["snapshot", "real"])
def test_the_sft_example_with_online_eval_stays_valid(schema: str, real_schema_ctx: Context, tmp_path: Path) -> None:
    report = validate(real_schema_ctx, write_config(example(SFT), tmp_path, f"{schema}.toml"), schema=schema)
    assert report.valid is True and "sft_online_eval" in [w.rule for w in report.warnings]


# --- 20. the run's name and the config's own name: the plan says why they differ ---------------------


def test_the_plan_says_why_the_run_name_and_the_configs_name_differ(frozen_ctx: Context, tmp_path: Path) -> None:
    path = tmp_path / "rl.toml"
    path.write_text('name = "my-run"\n' + EXAMPLE.read_text())
    plan = call(frozen_ctx, "mf_plan_run", config_path=str(path), team="personal")
    assert plan.run_name.startswith("my-run-mf") and "name = 'my-run'" in plan.summary
    assert all(len(line) <= 80 for line in plan.summary.splitlines() if "keeps name" in line)
    unnamed = tmp_path / "unnamed.toml"
    unnamed.write_text(EXAMPLE.read_text())
    assert "keeps name" not in call(frozen_ctx, "mf_plan_run", config_path=str(unnamed), team="personal").summary
