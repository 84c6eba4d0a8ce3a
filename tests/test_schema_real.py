"""The real back-end: prime-rl's RLConfig/SFTConfig in a Python 3.12 subprocess.

End to end on the fixture's schema environment (built once, cached; see tests/_schema_env.py):
the examples get the verdicts PROVENANCE.md records for ``prime train validate``, errors come
as key paths, the worker is kept for a batch and replaced when it dies, and the interpreter is
found where prime-rl users have one (a checkout run with ``uv run --no-sync``, the prime CLI's
cached schema environments, ``MODEL_FACTORY_SCHEMA_PYTHON``). Bad interpreters (wrong Python,
no prime_rl, a crash, a hang, garbage on stdout) give a finding and a fall-back to the
snapshot, never a traceback.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import schema_staging
from schema_staging import _real

pytest_plugins = ["_schema_env"]  # fixtures: schema_python, hosted_column
ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "tools" / "examples"


def example(name: str) -> dict:
    return tomllib.loads((EXAMPLES / f"{name}.toml").read_text())


def isolated(tmp_path: Path, **extra: str) -> dict[str, str]:
    """An environment that finds no interpreter by itself: HOME (the prime CLI's schema cache)
    in ``tmp_path``, PATH kept (for uv and the scripts' commands)."""
    return {"HOME": str(tmp_path), "PATH": os.environ["PATH"], **extra}


def script(tmp_path: Path, name: str, body: str) -> Path:
    """An executable shell script standing in for an interpreter that misbehaves."""
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


# --- end to end ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(str(p.relative_to(EXAMPLES).with_suffix(""))
                                        for p in EXAMPLES.rglob("*.toml")))
def test_real_schema_gives_each_example_the_verdict_prime_train_validate_gives(
        name: str, schema_python: Path, hosted_column: dict[str, bool]) -> None:
    verdict = schema_staging.check_real(example(name), python=schema_python)
    assert verdict.backend == "real" and verdict.fallback_from is None
    assert verdict.valid == hosted_column[name], [f.to_dict() for f in verdict.errors]


def test_real_schema_errors_are_key_paths_without_union_labels(schema_python: Path) -> None:
    config = example("basic/reverse-text/rl")
    config["trainer"]["optim"]["lr"] = "fast"  # pydantic says trainer.optim.adamw.lr
    verdict = schema_staging.check_real(config, python=schema_python)
    first = verdict.first_error
    assert first is not None and first.path == "trainer.optim.lr" and first.rule == "pydantic:float_parsing"


def test_real_schema_accepts_lax_values_and_reports_validator_warnings(schema_python: Path) -> None:
    config = example("advanced/glm-4.5-air/swe") | {"max_steps": "1000"}
    verdict = schema_staging.check_real(config, python=schema_python)
    assert verdict.valid
    assert any("Gradient clipping" in f.message for f in verdict.findings if f.severity == "warning")


def test_one_worker_serves_a_batch_and_a_dead_worker_is_replaced(schema_python: Path) -> None:
    interpreter = schema_staging.Interpreter.python(schema_python)
    first = _real.worker_for(interpreter, timeout=120)
    schema_staging.check_real(example("basic/wordle/sft"), python=schema_python)
    assert _real.worker_for(interpreter, timeout=120) is first
    first.process.kill()
    first.process.wait()
    verdict = schema_staging.check_real(example("basic/wordle/sft"), python=schema_python)
    assert verdict.valid and _real.worker_for(interpreter, timeout=120) is not first


def test_a_bare_venv_reports_an_unknown_schema_commit(schema_python: Path) -> None:
    verdict = schema_staging.check_real(example("basic/wordle/sft"), python=schema_python)
    assert verdict.schema_commit == "unknown" and "not recorded" in verdict.schema_source


# --- where the interpreter comes from ------------------------------------------------------


@pytest.fixture
def checkout(tmp_path: Path, schema_python: Path) -> tuple[Path, str]:
    """A prime-rl checkout shape (packages/prime-rl-configs, a git commit) whose ``.venv`` is
    the fixture's schema environment, as ``uv sync`` would have made it."""
    if shutil.which("uv") is None or shutil.which("git") is None:
        pytest.skip("needs uv and git")
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


def test_a_prime_rl_checkout_runs_with_uv_and_reports_its_git_head(checkout: tuple[Path, str]) -> None:
    root, head = checkout
    verdict = schema_staging.check_real(example("basic/reverse-text/rl"), prime_rl_dir=root,
                                        env={"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "")})
    # HOME is kept: uv finds its cache there
    assert verdict.valid and verdict.schema_commit == head
    assert verdict.interpreter == f"uv run --no-sync python in {root}"


def test_the_working_directory_inside_a_checkout_is_found(checkout: tuple[Path, str]) -> None:
    root, _ = checkout
    (root / "configs").mkdir()
    found = schema_staging.find_interpreters(env={"HOME": str(root)}, cwd=root / "configs")
    assert [i.cwd for i in found] == [root]


def test_the_prime_cli_cached_schema_environments_are_found_most_recent_first_if_ready(tmp_path: Path,
                                                                                       schema_python: Path) -> None:
    venv = schema_python.parent.parent
    cache = tmp_path / "cache" / "prime" / "training-schemas"
    for key in ("a" * 64, "b" * 64):
        target = cache / key
        target.mkdir(parents=True)
        shutil.copy(venv / "pyvenv.cfg", target / "pyvenv.cfg")
        (target / "bin").symlink_to(venv / "bin", target_is_directory=True)
        (target / "lib").symlink_to(venv / "lib", target_is_directory=True)
        (target / ".ready").touch()
    os.utime(cache / ("a" * 64) / ".ready", (1, 1))
    env = isolated(tmp_path, XDG_CACHE_HOME=str(tmp_path / "cache"))
    found = schema_staging.find_interpreters(env=env, cwd=tmp_path)
    assert [i.label for i in found] == [str(cache / k / "bin" / "python") for k in ("b" * 64, "a" * 64)]
    assert {i.origin for i in found} == {"prime CLI schema cache"}
    (cache / ("b" * 64) / ".ready").unlink()  # a build the CLI did not finish is not used
    assert [i.label for i in schema_staging.find_interpreters(env=env, cwd=tmp_path)] == [found[1].label]


def test_model_factory_schema_python_names_the_interpreter(schema_python: Path, tmp_path: Path) -> None:
    env = isolated(tmp_path, MODEL_FACTORY_SCHEMA_PYTHON=str(schema_python))
    found = schema_staging.find_interpreters(env=env, cwd=tmp_path)
    assert [i.origin for i in found] == ["MODEL_FACTORY_SCHEMA_PYTHON"]
    verdict = schema_staging.check(example("basic/wordle/sft"), schema="auto", env=env)
    assert verdict.backend == "real" and verdict.valid


# --- bad interpreters: a finding and the snapshot, never a traceback -------------------------


def other_python() -> str:
    """A real Python that is not 3.12."""
    if sys.version_info[:2] != (3, 12):
        return sys.executable
    for name in ("python3.11", "python3.13", "python3.10"):
        if shutil.which(name):
            return shutil.which(name)  # type: ignore[return-value]
    pytest.skip("no Python other than 3.12 on this machine")


def python312_without_prime_rl(schema_python: Path) -> str:
    """The Python 3.12 the fixture's venv was made from (it has no prime_rl)."""
    home = next(line.split("=", 1)[1].strip() for line in (schema_python.parent.parent / "pyvenv.cfg").read_text()
                .splitlines() if line.startswith("home"))
    return str(Path(home) / "python3.12")


def check_with(tmp_path: Path, python: str | Path | None, **kwargs: object) -> schema_staging.Verdict:
    """``schema="real"`` on a valid example with ``python``, nothing else to find."""
    return schema_staging.check(example("basic/wordle/sft"), schema="real", python=python, env=isolated(tmp_path),
                                **kwargs)  # type: ignore[arg-type]


def assert_fell_back(verdict: schema_staging.Verdict, rule: str, words: str) -> None:
    assert verdict.backend == "snapshot" and verdict.fallback_from == "real"
    assert verdict.valid, "the snapshot's verdict on a valid example"
    backend = [f for f in verdict.findings if f.stage == "backend"]
    assert len(backend) == 1 and backend[0].rule == rule and backend[0].severity == "warning", backend
    assert words in backend[0].message and "real prime-rl schema unavailable" in backend[0].message


def test_a_python_that_is_not_3_12_falls_back_to_the_snapshot(tmp_path: Path) -> None:
    verdict = check_with(tmp_path, other_python())
    assert_fell_back(verdict, "backend:python_version", "needs Python 3.12")


def test_an_interpreter_without_prime_rl_falls_back_to_the_snapshot(schema_python: Path, tmp_path: Path) -> None:
    verdict = check_with(tmp_path, python312_without_prime_rl(schema_python))
    assert_fell_back(verdict, "backend:no_prime_rl", "prime_rl.configs does not import")


def test_an_interpreter_that_crashes_falls_back_and_shows_its_last_words(tmp_path: Path) -> None:
    crash = script(tmp_path, "crash", "echo 'Fatal Python error: boom' >&2\nexit 3")
    verdict = check_with(tmp_path, crash)
    assert_fell_back(verdict, "backend:exited", "exited with status 3")
    assert any("Fatal Python error: boom" in f.message for f in verdict.findings if f.stage == "backend")


def test_an_interpreter_that_hangs_is_stopped_at_the_timeout(tmp_path: Path) -> None:
    hang = script(tmp_path, "hang", "exec sleep 60")
    verdict = check_with(tmp_path, hang, timeout=0.5)
    assert_fell_back(verdict, "backend:timeout", "no answer within 0.5 s")


def test_an_interpreter_that_prints_garbage_falls_back(tmp_path: Path) -> None:
    garbage = script(tmp_path, "garbage", "echo 'Welcome to Python!'\nsleep 5")
    verdict = check_with(tmp_path, garbage)
    assert_fell_back(verdict, "backend:protocol", "'Welcome to Python!'")


def test_a_missing_interpreter_falls_back(tmp_path: Path) -> None:
    verdict = check_with(tmp_path, tmp_path / "nope")
    assert_fell_back(verdict, "backend:start", "cannot start it")


def test_auto_with_no_interpreter_uses_the_snapshot_silently(tmp_path: Path) -> None:
    verdict = schema_staging.check(example("basic/wordle/sft"), schema="auto", env=isolated(tmp_path))
    assert verdict.backend == "snapshot" and verdict.fallback_from is None
    assert not [f for f in verdict.findings if f.stage == "backend"]


def test_real_requested_with_no_interpreter_says_how_to_get_one(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    verdict = check_with(tmp_path, None)
    assert_fell_back(verdict, "backend:not_found", "no interpreter with prime_rl.configs found")
    assert "MODEL_FACTORY_SCHEMA_PYTHON" in verdict.findings[0].message


def test_a_bad_interpreter_before_a_good_one_is_reported_and_the_good_one_decides(tmp_path: Path,
                                                                                  schema_python: Path) -> None:
    crash = script(tmp_path, "crash", "exit 1")
    env = isolated(tmp_path, MODEL_FACTORY_SCHEMA_PYTHON=str(schema_python))
    verdict = schema_staging.check_real(example("basic/wordle/sft"), python=crash, env=env)
    assert verdict.backend == "real" and verdict.valid and verdict.interpreter == str(schema_python)
    assert [f.rule for f in verdict.findings if f.stage == "backend"] == ["backend:exited"]
