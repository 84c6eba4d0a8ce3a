"""The real back-end: prime-rl's RLConfig/SFTConfig in a Python 3.12 subprocess, through mf_validate_config.

End to end on the fixture's schema environment (built once, cached; see tests/_schema_env.py):
the examples get the verdicts PROVENANCE.md records for ``prime train validate``, errors come
as key paths, the worker is kept for a batch and replaced when it dies, and the interpreter is
found where prime-rl users have one (a checkout run with ``uv run --no-sync``, the prime CLI's
cached schema environments, ``MODEL_FACTORY_SCHEMA_PYTHON``). Bad interpreters (wrong Python,
no prime_rl, a crash, a hang, garbage on stdout) give a warning and a fall-back to the
snapshot, never a traceback.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _helpers import script, unavailable
from _schema_env import backend_warnings, example, first_error, validate_table

from tools.configs import EXAMPLES_DIR, Interpreter, ValidateConfigResult, find_interpreters, schema_worker
from tools.core import Context


def with_env(ctx: Context, **extra: str) -> Context:
    """``ctx`` with more environment variables."""
    return Context(env={**ctx.env, **extra}, home=ctx.home, cwd=ctx.cwd, state_dir=ctx.state_dir)


@pytest.fixture
def real_ctx(schema_ctx: Context, schema_python: Path) -> Context:
    """A context whose MODEL_FACTORY_SCHEMA_PYTHON is the fixture's schema environment."""
    return with_env(schema_ctx, MODEL_FACTORY_SCHEMA_PYTHON=str(schema_python))


# --- end to end ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(str(p.relative_to(EXAMPLES_DIR).with_suffix(""))
                                        for p in EXAMPLES_DIR.rglob("*.toml")))
def test_real_schema_gives_each_example_the_verdict_prime_train_validate_gives(
        name: str, real_ctx: Context, hosted_column: dict[str, bool]) -> None:
    report = validate_table(example(name), real_ctx, schema="real")
    assert report.schema_check == "real" and report.fallback_from is None and not backend_warnings(report)
    assert report.valid == hosted_column[name], [e.model_dump() for e in report.errors]


def test_real_schema_errors_are_key_paths_without_union_labels_with_their_line(real_ctx: Context) -> None:
    config = example("basic/reverse-text/rl")
    config["trainer"]["optim"]["lr"] = "fast"  # pydantic says trainer.optim.adamw.lr
    report = validate_table(config, real_ctx, schema="real")
    assert first_error(report) == ("trainer.optim.lr", "pydantic:float_parsing")
    assert report.errors[0].line is not None and report.errors[0].fix


def test_real_schema_accepts_lax_values_and_reports_validator_warnings(real_ctx: Context) -> None:
    config = example("advanced/glm-4.5-air/swe") | {"max_steps": "1000"}
    report = validate_table(config, real_ctx, schema="real")
    assert report.valid
    assert any("Gradient clipping" in w.message for w in report.warnings)


def test_one_worker_serves_a_batch_and_a_dead_worker_is_replaced(real_ctx: Context, schema_python: Path) -> None:
    interpreter = Interpreter.python(schema_python)
    first = schema_worker(interpreter, timeout=120)
    validate_table(example("basic/wordle/sft"), real_ctx, schema="real")
    assert schema_worker(interpreter, timeout=120) is first
    first.process.kill()
    first.process.wait()
    changed = example("basic/wordle/sft") | {"max_steps": 7}  # not a remembered verdict
    report = validate_table(changed, real_ctx, schema="real", name="changed.toml")
    assert report.valid and report.schema_check == "real"
    assert schema_worker(interpreter, timeout=120) is not first


def test_a_bare_venv_reports_an_unknown_schema_commit(real_ctx: Context) -> None:
    report = validate_table(example("basic/wordle/sft"), real_ctx, schema="real")
    assert report.schema_commit == "unknown" and "not recorded" in report.schema_source


def test_auto_uses_the_real_schema_when_an_interpreter_is_found(real_ctx: Context) -> None:
    report = validate_table(example("basic/wordle/sft"), real_ctx, schema="auto")
    assert report.schema_check == "real" and report.schema_interpreter and report.valid


# --- where the interpreter comes from ------------------------------------------------------


@pytest.fixture
def checkout(tmp_path: Path, schema_python: Path) -> tuple[Path, str]:
    """A prime-rl checkout shape (packages/prime-rl-configs, a git commit) whose ``.venv`` is
    the fixture's schema environment, as ``uv sync`` would have made it."""
    if shutil.which("uv") is None or shutil.which("git") is None:
        unavailable("needs uv and git", "MF_REQUIRE_SCHEMA")
    root = tmp_path / "prime-rl"
    (root / "packages" / "prime-rl-configs").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "prime-rl"\nversion = "0"\n'
                                        'requires-python = ">=3.12"\n')
    (root / "packages" / "prime-rl-configs" / "pyproject.toml").write_text('[project]\nname = "prime-rl-configs"\n')
    (root / ".venv").symlink_to(schema_python.parent.parent, target_is_directory=True)
    git = ["git", "-C", str(root), "-c", "user.email=tests@example.invalid", "-c", "user.name=tests"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "pyproject.toml", "packages"], check=True)
    subprocess.run([*git, "commit", "-qm", "checkout"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    return root, head


def test_a_prime_rl_checkout_runs_with_uv_and_reports_its_git_head(checkout: tuple[Path, str],
                                                                   schema_ctx: Context) -> None:
    root, head = checkout
    ctx = with_env(schema_ctx, HOME=os.environ.get("HOME", ""))  # uv finds its cache in the real HOME
    report = validate_table(example("basic/reverse-text/rl"), ctx, schema="real", prime_rl_dir=str(root))
    assert report.valid and report.schema_check == "real" and report.schema_commit == head
    assert report.schema_interpreter == f"uv run --no-sync python in {root}"
    assert report.schema_source == f"git HEAD of {root}"


def test_a_checkout_with_uncommitted_changes_says_so_and_is_not_cached_on_disk(checkout: tuple[Path, str]) -> None:
    root, head = checkout
    (root / "pyproject.toml").write_text((root / "pyproject.toml").read_text() + "# edited\n")
    [found] = find_interpreters(prime_rl_dir=root, env={"HOME": str(root)}, cwd=root.parent)
    assert found.commit == head and "uncommitted changes" in found.commit_source and not found.cacheable


def test_the_working_directory_inside_a_checkout_is_found(checkout: tuple[Path, str]) -> None:
    root, _ = checkout
    (root / "configs").mkdir()
    found = find_interpreters(env={"HOME": str(root)}, cwd=root / "configs")
    assert [i.cwd for i in found] == [root]


def test_a_prime_rl_dir_that_is_not_a_checkout_is_reported(schema_ctx: Context, tmp_path: Path) -> None:
    report = validate_table(example("basic/wordle/sft"), schema_ctx, schema="auto", prime_rl_dir=str(tmp_path))
    assert report.schema_check == "snapshot" and report.fallback_from == "real" and report.valid
    [warning] = backend_warnings(report)
    assert warning.rule == "backend:not_a_checkout" and f"{tmp_path} is not a prime-rl checkout" in warning.message


def prime_cli_cache(tmp_path: Path, schema_python: Path, keys: tuple[str, ...]) -> Path:
    """Schema venvs laid out as ``prime train validate`` caches them, all ready, made of the fixture's venv."""
    venv = schema_python.parent.parent
    cache = tmp_path / "cache" / "prime" / "training-schemas"
    for key in keys:
        target = cache / key
        target.mkdir(parents=True)
        shutil.copy(venv / "pyvenv.cfg", target / "pyvenv.cfg")
        (target / "bin").symlink_to(venv / "bin", target_is_directory=True)
        (target / "lib").symlink_to(venv / "lib", target_is_directory=True)
        (target / ".ready").touch()
    return cache


def test_the_prime_cli_cached_schema_environments_are_found_most_recent_first_if_ready(tmp_path: Path,
                                                                                       schema_python: Path) -> None:
    cache = prime_cli_cache(tmp_path, schema_python, ("a" * 64, "b" * 64))
    os.utime(cache / ("a" * 64) / ".ready", (1, 1))
    env = {"HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    found = find_interpreters(env=env, cwd=tmp_path)
    assert [i.label for i in found] == [str(cache / k / "bin" / "python") for k in ("b" * 64, "a" * 64)]
    assert {i.origin for i in found} == {"prime CLI schema cache"}
    (cache / ("b" * 64) / ".ready").unlink()  # a build the CLI did not finish is not used
    assert [i.label for i in find_interpreters(env=env, cwd=tmp_path)] == [found[1].label]


def test_model_factory_schema_python_names_the_interpreter(schema_python: Path, tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "MODEL_FACTORY_SCHEMA_PYTHON": str(schema_python)}
    assert [i.origin for i in find_interpreters(env=env, cwd=tmp_path)] == ["MODEL_FACTORY_SCHEMA_PYTHON"]


# --- bad interpreters: a warning and the snapshot, never a traceback -------------------------


def other_python() -> str:
    """A real Python that is not 3.12."""
    if sys.version_info[:2] != (3, 12):
        return sys.executable
    for name in ("python3.11", "python3.13", "python3.10"):
        if shutil.which(name):
            return shutil.which(name)  # type: ignore[return-value]
    unavailable("no Python other than 3.12 on this machine", "MF_REQUIRE_SCHEMA")


def python312_without_prime_rl(schema_python: Path) -> str:
    """The Python 3.12 the fixture's venv was made from (it has no prime_rl)."""
    home = next(line.split("=", 1)[1].strip() for line in (schema_python.parent.parent / "pyvenv.cfg").read_text()
                .splitlines() if line.startswith("home"))
    return str(Path(home) / "python3.12")


def real_with(ctx: Context, python: str | Path | None, **arguments: object) -> ValidateConfigResult:
    """schema='real' on a valid example with MODEL_FACTORY_SCHEMA_PYTHON=python, nothing else to find."""
    if python is not None:
        ctx = with_env(ctx, MODEL_FACTORY_SCHEMA_PYTHON=str(python))
    return validate_table(example("basic/wordle/sft"), ctx, schema="real", **arguments)


def assert_fell_back(report: ValidateConfigResult, rule: str, words: str) -> None:
    assert report.schema_check == "snapshot" and report.fallback_from == "real"
    assert report.valid, "the snapshot's verdict on a valid example"
    [warning] = backend_warnings(report)
    assert warning.rule == rule and words in warning.message and warning.fix, warning
    assert "real prime-rl schema unavailable" in warning.message


def test_a_python_that_is_not_3_12_falls_back_to_the_snapshot(schema_ctx: Context) -> None:
    assert_fell_back(real_with(schema_ctx, other_python()), "backend:python_version", "needs Python 3.12")


def test_an_interpreter_without_prime_rl_falls_back_to_the_snapshot(schema_ctx: Context, schema_python: Path) -> None:
    report = real_with(schema_ctx, python312_without_prime_rl(schema_python))
    assert_fell_back(report, "backend:no_prime_rl", "prime_rl.configs does not import")


def test_an_interpreter_that_crashes_falls_back_and_shows_its_last_words(schema_ctx: Context,
                                                                         tmp_path: Path) -> None:
    report = real_with(schema_ctx, script(tmp_path, "crash", "echo 'Fatal Python error: boom' >&2\nexit 3"))
    assert_fell_back(report, "backend:exited", "exited with status 3")
    assert "Fatal Python error: boom" in backend_warnings(report)[0].message


def test_an_interpreter_that_hangs_is_stopped_at_the_timeout(schema_ctx: Context, tmp_path: Path) -> None:
    report = real_with(schema_ctx, script(tmp_path, "hang", "exec sleep 60"), timeout_seconds=0.5)
    assert_fell_back(report, "backend:timeout", "no answer within 0.5 s")


def test_an_interpreter_that_prints_garbage_falls_back(schema_ctx: Context, tmp_path: Path) -> None:
    report = real_with(schema_ctx, script(tmp_path, "garbage", "echo 'Welcome to Python!'\nsleep 5"))
    assert_fell_back(report, "backend:protocol", "'Welcome to Python!'")


def test_a_missing_interpreter_falls_back(schema_ctx: Context, tmp_path: Path) -> None:
    assert_fell_back(real_with(schema_ctx, tmp_path / "nope"), "backend:start", "cannot start it")


def test_auto_with_no_interpreter_uses_the_snapshot_silently(schema_ctx: Context) -> None:
    report = validate_table(example("basic/wordle/sft"), schema_ctx, schema="auto")
    assert report.schema_check == "snapshot" and report.fallback_from is None and not backend_warnings(report)


def test_real_requested_with_no_interpreter_says_how_to_get_one(schema_ctx: Context) -> None:
    report = real_with(schema_ctx, None)
    assert_fell_back(report, "backend:not_found", "no interpreter with prime_rl.configs found")
    assert "MODEL_FACTORY_SCHEMA_PYTHON" in backend_warnings(report)[0].message


def test_a_bad_interpreter_before_a_good_one_is_reported_and_the_good_one_decides(schema_ctx: Context,
                                                                                  tmp_path: Path,
                                                                                  schema_python: Path) -> None:
    prime_cli_cache(tmp_path, schema_python, ("c" * 64,))
    ctx = with_env(schema_ctx, XDG_CACHE_HOME=str(tmp_path / "cache"),
                   MODEL_FACTORY_SCHEMA_PYTHON=str(script(tmp_path, "crash", "exit 1")))
    report = validate_table(example("basic/wordle/sft"), ctx, schema="real")
    assert report.schema_check == "real" and report.valid and report.fallback_from is None
    assert report.schema_interpreter == str(tmp_path / "cache" / "prime" / "training-schemas" / ("c" * 64) / "bin"
                                            / "python")
    assert [w.rule for w in backend_warnings(report)] == ["backend:exited"]
