"""Inputs without limits: what is not a config file, files too large, TOML nested too deeply,
numbers out of range, a destination that cannot be a new file, lists of secret names.

Through the ``model-factory`` CLI (a new process; its timeout only guards against a hang) or
the registry, against the emulator where a plan needs it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest
from _helpers import EXAMPLE, mf, mf_json, pasted, unavailable

from skill import registry
from tools.configs import MAX_CONFIG_BYTES
from tools.core import INT64_MAX, Context
from tools.errors import ToolError


@pytest.fixture(params=["dev_zero", "fifo", "folder", "sparse_1gb"])
def not_a_config(request, tmp_path: Path) -> tuple[Path, str, str]:
    """Paths that must be refused before reading: (path, what the message says, error code). A path that is not a
    file at all, or one too large to be a config (its size said), is a wrong argument (bad_arguments, exit 2)."""
    if request.param == "dev_zero":
        return Path("/dev/zero"), "not a regular file", "bad_arguments"
    if request.param == "fifo":
        path = tmp_path / "pipe.toml"
        os.mkfifo(path)  # nobody writes: an open without O_NONBLOCK, or a read, would wait forever
        return path, "not a regular file", "bad_arguments"
    if request.param == "folder":
        path = tmp_path / "folder.toml"
        path.mkdir()
        return path, "is a folder", "bad_arguments"
    path = tmp_path / "huge.toml"
    with open(path, "wb") as handle:  # sparse: 1 GB long, no disk used
        handle.truncate(1024**3)
    return path, "is 1,073.7 MB (1,073,741,824 bytes), larger than 1,048,576 bytes", "bad_arguments"


def test_anything_but_a_regular_config_file_is_refused_before_reading(mf_env, not_a_config):
    path, said, code_expected = not_a_config
    exit_expected = 2 if code_expected == "bad_arguments" else 3
    for args, argument in ((("validate-config", str(path)), "config_path"),
                           (("plan-run", str(path), "--team", "personal"), "config_path"),
                           (("prepare-config", str(path), str(path.parent / "copy.toml")), "example")):
        code, error = mf_json(*args, env=mf_env)
        assert (code, error["code"]) == (exit_expected, code_expected) and said in error["message"], error
        if code_expected == "bad_arguments":  # the argument that named it, and what to pass instead
            assert [f["path"] for f in error["fields"]] == [argument], error
            assert error["fix"].startswith(("Pass the path of a .toml file", "Pass the path of the prime-rl")), error
    assert not (path.parent / "copy.toml").exists()


def test_a_config_of_exactly_the_limit_is_read_and_one_byte_more_is_not(mf_env, tmp_path):
    text = EXAMPLE.read_text() + "\n#"
    at_limit = tmp_path / "at.toml"
    at_limit.write_text(text + "x" * (MAX_CONFIG_BYTES - len(text.encode()) - 1) + "\n")
    assert at_limit.stat().st_size == MAX_CONFIG_BYTES
    code, report = mf_json("validate-config", str(at_limit), env=mf_env)
    assert code == 0 and report["valid"], report
    over = tmp_path / "over.toml"
    over.write_bytes(at_limit.read_bytes() + b"\n")
    code, error = mf_json("validate-config", str(over), env=mf_env)
    assert (code, error["code"]) == (2, "bad_arguments") and "(1,048,577 bytes)" in error["message"]


def test_a_file_whose_size_is_not_known_before_reading_is_read_only_up_to_the_limit(mf_env):
    """/proc/kallsyms reports size 0 and holds megabytes: only limit + 1 bytes are read, then refused."""
    source = Path("/proc/kallsyms")
    if not source.is_file() or source.stat().st_size != 0:
        unavailable("needs a Linux /proc file that reports size 0", "MF_REQUIRE_LINUX")
    code, error = mf_json("validate-config", str(source), env=mf_env)
    assert (code, error["code"]) == (2, "bad_arguments") and "more than 1,048,576 bytes long" in error["message"]


DEEP = 5000
NESTED = {
    "arrays": "x = " + "[" * DEEP + "]" * DEEP + "\n",
    "inline_tables": "x = " + "{a = " * DEEP + "1" + "}" * DEEP + "\n",
    "mixed": "x = " + "[{a = " * (DEEP // 2) + "1" + "}]" * (DEEP // 2) + "\n",
    "dotted_keys": "x" + ".a" * DEEP + " = 1\n",
    "table_headers": "[" + ".".join(["a"] * DEEP) + "]\nb = 1\n",
}


@pytest.mark.parametrize("shape", sorted(NESTED))
def test_deeply_nested_toml_is_a_clear_invalid_toml_error(mf_env, tmp_path, shape):
    cfg = tmp_path / "deep.toml"
    cfg.write_text(EXAMPLE.read_text() + "\n" + NESTED[shape])
    for args in (("validate-config", str(cfg)), ("plan-run", str(cfg), "--team", "personal"),
                 ("prepare-config", str(cfg), str(tmp_path / "copy.toml"))):
        code, error = mf_json(*args, env=mf_env)
        assert (code, error["code"]) == (3, "invalid_toml"), error
        assert "nested more than 64 levels" in error["message"]
    assert not (tmp_path / "copy.toml").exists()


def test_nesting_within_the_limit_is_still_valid_toml(mf_env, tmp_path):
    cfg = tmp_path / "ok.toml"
    # under [inference.vllm], which passes extra keys on to vLLM as they are (an unknown table would be a schema error)
    cfg.write_text(EXAMPLE.read_text() + "\n[inference.vllm]\nx = " + "[" * 60 + "]" * 60 + "\n")
    code, report = mf_json("validate-config", str(cfg), env=mf_env)
    assert code == 0 and "invalid_toml" not in json.dumps(report)


@pytest.mark.parametrize(("option", "value", "accepted"), [
    ("--seconds-per-step", "inf", "at most 86,400"),
    ("--seconds-per-step", "nan", "at most 86,400"),
    ("--seconds-per-step", "-inf", "more than 0"),
    ("--seconds-per-step", "1e300", "at most 86,400"),
    ("--seconds-per-step", "-1", "more than 0"),
    ("--seconds-per-step", "0", "more than 0"),
    ("--max-steps", "99999999999999999999999", "1 to 10,000,000"),
    ("--max-steps", "10000001", "1 to 10,000,000"),
    ("--max-steps", "-5", "1 to 10,000,000"),
    ("--max-steps", "0", "1 to 10,000,000"),
])
def test_out_of_range_numbers_are_usage_errors_stating_the_range(mf_env, tmp_path, option, value, accepted):
    code, error = mf_json("plan-run", str(EXAMPLE), "--team", "personal", f"{option}={value}", env=mf_env)
    assert (code, error["code"]) == (2, "bad_arguments"), error
    field = option.removeprefix("--").replace("-", "_")
    assert [f["path"] for f in error["fields"]] == [field] and accepted in error["fields"][0]["problem"]
    done = mf("plan-run", str(EXAMPLE), "--team", "personal", f"{option}={value}", env=mf_env)
    assert done.returncode == 2 and accepted in done.stderr and "Traceback" not in done.stderr


def test_the_largest_accepted_figures_plan_with_their_warnings(emulator, mf_env):
    code, plan = mf_json("plan-run", str(EXAMPLE), "--team", "personal", "--max-steps", "10000000",
                         "--seconds-per-step", "86400", env=mf_env)
    assert code == 0 and plan["max_steps"] == 10_000_000, plan
    said = " ".join(plan["warnings"])
    assert "The high cost estimate is $" in said and "The step cap is 10,000,000 steps" in said, plan["warnings"]


def test_non_finite_json_numbers_from_an_mcp_client_are_bad_arguments(mf_env):
    ctx = Context(env=mf_env)
    for raw in ('{"config_path": "x.toml", "seconds_per_step": Infinity}',
                '{"config_path": "x.toml", "seconds_per_step": NaN}',
                '{"config_path": "x.toml", "max_steps": 1e400}'):
        result = registry.call_tool("mf_plan_run", raw, ctx)
        assert isinstance(result, ToolError) and result.code == "bad_arguments", (raw, result)


def _required(spec: Any) -> dict[str, Any]:
    return {name: "x" for name, info in spec.input_model.model_fields.items() if info.is_required()}


def test_every_numeric_argument_of_every_tool_is_bounded(mf_env):
    """An integer beyond 64 bits and a non-finite number are refused for every numeric field."""
    ctx = Context(env=mf_env)
    checked = 0
    for spec in registry.TOOLS:
        for name, info in spec.input_model.model_fields.items():
            kinds = {info.annotation, *getattr(info.annotation, "__args__", ())}
            bad = [INT64_MAX + 1] if int in kinds else [float("inf"), float("nan")] if float in kinds else []
            for value in bad:
                result = registry.call_tool(spec.name, {**_required(spec), name: value}, ctx)
                assert isinstance(result, ToolError) and result.code == "bad_arguments", (spec.name, name, value)
                assert name in [f.path for f in result.fields], (spec.name, name, result.fields)
                checked += 1
    assert checked >= 25


@pytest.mark.parametrize("command", ["demo", "emulator"])
@pytest.mark.parametrize("speed", ["-1", "nan", "inf", "1e9"])
def test_a_clock_speed_out_of_range_is_a_usage_error(mf_env, command, speed):
    done = mf(command, "--speed", speed, env=mf_env)
    assert done.returncode == 2 and "0 to 1e+06" in done.stderr and "Traceback" not in done.stderr


def test_prepare_creates_the_missing_folders_of_its_destination_and_says_so(mf_env, tmp_path):
    dest = tmp_path / "missing" / "dir with space" / "x.toml"
    code, result = mf_json("prepare-config", "basic/reverse-text/rl", str(dest), env=mf_env)
    assert code == 0 and result["path"] == str(dest) and dest.is_file() and result["valid"], result
    assert result["created_folders"] == [str(tmp_path / "missing"), str(dest.parent)]
    human = mf("prepare-config", "basic/reverse-text/rl", str(tmp_path / "more" / "y.toml"), env=mf_env)
    assert human.returncode == 0 and f"Created 1 folder for it: {tmp_path / 'more'}." in human.stderr, human.stderr
    code, existing = mf_json("prepare-config", "basic/reverse-text/rl", str(tmp_path / "z.toml"), env=mf_env)
    assert code == 0 and existing["created_folders"] is None


def test_prepare_removes_the_folders_it_made_when_the_write_fails(mf_env, tmp_path):
    dest = tmp_path / "made" / "deeper" / ("a" * 245 + ".toml")  # a name the file system takes, its temp file's not
    code, error = mf_json("prepare-config", "basic/reverse-text/rl", str(dest), env=mf_env)
    assert (code, error["code"]) == (3, "write_failed") and not (tmp_path / "made").exists(), error


@pytest.fixture(params=["folder", "fifo", "device", "under_a_file", "not_toml"])
def wrong_destination(request, tmp_path: Path) -> tuple[Path, str]:
    """A destination prepare-config must refuse, and what its message says of it (a name not ending in .toml is
    not repeated: it may be a value pasted in the wrong place)."""
    project = tmp_path / "project"
    project.mkdir()
    if request.param == "folder":
        (project / "configs.toml").mkdir()
        return project / "configs.toml", "is a folder"
    if request.param == "fifo":
        os.mkfifo(project / "pipe.toml")
        return project / "pipe.toml", "is not a regular file"
    if request.param == "device":
        return Path("/dev/null"), "is not a regular file"
    if request.param == "under_a_file":
        (project / "notes").write_text("mine\n")
        return project / "notes" / "sub" / "x.toml", f"{project / 'notes'} is a file, not a folder"
    return project / "run.yaml", "does not end in .toml"


def test_a_wrong_destination_is_named_with_a_command_that_works_when_pasted(mf_env, tmp_path, wrong_destination):
    dest, said = wrong_destination
    state = Path(mf_env["MODEL_FACTORY_STATE_DIR"])  # where every call is audited: not the user's files

    def files() -> list[Path]:
        return sorted(p for p in tmp_path.rglob("*") if state not in (p, *p.parents))

    before = files()
    args = ("prepare-config", "basic/reverse-text/rl", str(dest), "--num-train-gpus", "1", "--num-infer-gpus", "1")
    code, error = mf_json(*args, env=mf_env, cwd=tmp_path / "project")
    shown = dest.suffix == ".toml" or dest.exists()
    assert (code, error["code"]) == (2, "bad_arguments") and (str(dest) in json.dumps(error)) is shown, error
    assert said in error["message"] and [f["path"] for f in error["fields"]] == ["dest"], error
    human = mf(*args, env=mf_env, cwd=tmp_path / "project")
    assert human.returncode == 2 and "Traceback" not in human.stderr and (str(dest) in human.stderr) is shown
    assert files() == before  # nothing written, no folder made
    fix = re.search(r"Fix: .*?e\.g\. `([^`]+)`", " ".join(human.stderr.split()))
    assert fix, human.stderr
    done = pasted(fix[1], mf_env, cwd=tmp_path / "project")
    assert done.returncode == 0, done.stderr
    words = shlex.split(fix[1])
    written = Path(words[words.index("prepare-config") + 2])
    assert written.is_file() and written.suffix == ".toml" and written != dest
    assert tomllib.loads(written.read_text())["deployment"] == {"num_train_gpus": 1, "num_infer_gpus": 1}


def test_prepare_exits_1_when_the_file_it_wrote_is_invalid(mf_env, tmp_path):
    good, bad = tmp_path / "good.toml", tmp_path / "bad.toml"
    code, result = mf_json("prepare-config", "basic/reverse-text/rl", str(good), env=mf_env)
    assert code == 0 and result["valid"] is True
    code, result = mf_json("prepare-config", "basic/reverse-text/rl", str(bad), "--num-infer-gpus", "0", env=mf_env)
    assert code == 1 and result["valid"] is False and result["validation"]["errors"] and bad.exists()
    assert mf("prepare-config", "basic/reverse-text/rl", str(tmp_path / "b2.toml"),
              "--num-infer-gpus", "0", env=mf_env).returncode == 1


@pytest.mark.parametrize("secrets", [["WANDB_API_KEY,HF_TOKEN"], ["WANDB_API_KEY, HF_TOKEN"],
                                     ["WANDB_API_KEY", "HF_TOKEN"]])
def test_secret_names_may_come_comma_separated(emulator, mf_env, secrets):
    env = {**mf_env, "WANDB_API_KEY": "fake-wandb-FAKEFAKEFAKE", "HF_TOKEN": "hf_" + "FAKE" * 9}
    plan = registry.call_tool("mf_plan_run", {"config_path": str(EXAMPLE), "team": "personal", "secrets": secrets},
                              Context(env=env))
    assert not isinstance(plan, ToolError), plan
    assert plan.secret_names == ["HF_TOKEN", "WANDB_API_KEY"]
    code, out = mf_json("plan-run", str(EXAMPLE), "--team", "personal",
                        *[arg for name in secrets for arg in ("--secrets", name)], env=env)
    assert code == 0 and out["secret_names"] == ["HF_TOKEN", "WANDB_API_KEY"], out


@pytest.mark.parametrize("tool, field", [("mf_validate_config", "config_path"), ("mf_prepare_config", "dest"),
                                         ("mf_download_traces", "dest"), ("mf_plan_run", "config_path")])
def test_a_path_with_a_nul_or_an_unknown_users_home_is_bad_arguments(mf_env, tmp_path, tool, field):
    ctx = Context(env=mf_env, home=tmp_path / "home", state_dir=tmp_path / "state", cwd=tmp_path)
    base = {"mf_prepare_config": {"example": "basic/reverse-text/rl"}, "mf_download_traces": {"run_id": "r1"}}
    for path in ("x\x00y.toml", "~no-such-user-here/x.toml"):
        result = registry.call_tool(tool, {**base.get(tool, {}), field: path}, ctx)
        assert isinstance(result, ToolError) and result.code == "bad_arguments", result
        assert path not in result.model_dump_json()


def test_a_lone_surrogate_in_any_argument_is_bad_arguments_naming_the_field(mf_env, tmp_path):
    ctx = Context(env=mf_env, home=tmp_path / "home", state_dir=tmp_path / "state", cwd=tmp_path)
    result = registry.call_tool("mf_plan_run", json.dumps({"config_path": "a\udcffb.toml", "secrets": ["x", "\ud83d"]}),
                                ctx)
    assert isinstance(result, ToolError) and result.code == "bad_arguments"
    assert [f.path for f in result.fields] == ["config_path", "secrets.1"]
    json.loads(result.model_dump_json())  # the answer is valid UTF-8 JSON
