"""Fixtures and helpers for the schema tests: the real prime-rl schema environment, prime 0.18.0,
and mf_validate_config on a parsed table.

Use them from a test module with ``pytest_plugins = ["_schema_env"]``. The environments are
built once and cached (benchmarks/_conformance/envs.py: the fixture's ``build-venv.sh
--with-tasksets`` under ``~/.cache/model-factory-skill/prime-rl-schema-<hash>``, about 15 s
with a warm package cache; prime 0.18.0 from PyPI, shared with tests/test_prime_cli_interop.py).
Without ``../shared/fixtures/prime-rl-schema``, uv or the package registry the tests skip and
say why, unless ``MF_REQUIRE_SCHEMA=1`` (set by ``.ci/run``), which turns that into a failure.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomlkit
from _helpers import unavailable

from benchmarks._conformance import envs
from skill.registry import call_tool
from tools.configs import EXAMPLES_DIR, ValidateConfigResult
from tools.core import Context


@pytest.fixture(scope="session")
def schema_python() -> Path:
    """``bin/python`` of the fixture's prime-rl schema environment (with the four tasksets)."""
    try:
        return envs.schema_python(tasksets=True)
    except envs.EnvironmentUnavailable as exc:
        unavailable(str(exc), "MF_REQUIRE_SCHEMA")


@pytest.fixture(scope="session")
def prime_python() -> Path:
    """``bin/python`` of the prime 0.18.0 environment (the reference's CLI code)."""
    try:
        return envs.prime_python()
    except envs.EnvironmentUnavailable as exc:
        unavailable(str(exc), "MF_REQUIRE_SCHEMA")


@pytest.fixture(scope="session")
def hosted_column() -> dict[str, bool]:
    """The fixture's PROVENANCE.md, column "as prime train validate 0.18.0 runs it": example id
    (``basic/reverse-text/rl``) -> accepted."""
    table = envs.fixture_dir() / "PROVENANCE.md"
    if not table.is_file():
        unavailable(f"no {table}", "MF_REQUIRE_SCHEMA")
    verdicts = {}
    for line in table.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].endswith(".toml"):
            verdicts[re.sub(r"\.toml$", "", cells[0])] = cells[3].startswith("ok")
    assert len(verdicts) == 10, f"expected 10 examples in {table}, found {sorted(verdicts)}"
    return verdicts


@pytest.fixture
def schema_ctx(tmp_path: Path) -> Context:
    """A Context that finds no prime-rl interpreter by itself: HOME (the prime CLI's schema cache)
    and the state folder in ``tmp_path``, PATH kept (uv, git)."""
    home = tmp_path / "home"
    home.mkdir()
    return Context(env={"HOME": str(home), "PATH": os.environ["PATH"]}, home=home, cwd=tmp_path,
                   state_dir=tmp_path / "state")


@pytest.fixture(scope="module")
def real_schema_ctx(schema_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Context:
    """A Context for a whole test module whose MODEL_FACTORY_SCHEMA_PYTHON is the fixture's schema
    environment; HOME, working and state folders in a temporary folder, PATH the system's."""
    folder = tmp_path_factory.mktemp("real-schema")
    env = {"HOME": str(folder), "PATH": "/usr/bin:/bin", "MODEL_FACTORY_SCHEMA_PYTHON": str(schema_python)}
    return Context(env=env, home=folder, cwd=folder, state_dir=folder / "state")


def example(name: str) -> dict[str, Any]:
    """The parsed TOML of a bundled example (``basic/reverse-text/rl``)."""
    return tomllib.loads((EXAMPLES_DIR / f"{name}.toml").read_text())


def write_config(table: dict[str, Any], folder: Path, name: str = "config.toml") -> Path:
    """``table`` written as TOML (tomlkit) into ``folder``; the file reads back as ``table``."""
    path = folder / name
    path.write_text(tomlkit.dumps(table))
    assert tomllib.loads(path.read_text()) == table, "the table does not survive a TOML round trip"
    return path


def validate_table(table: dict[str, Any], ctx: Context, *, schema: str = "snapshot", name: str = "config.toml",
                   **arguments: Any) -> ValidateConfigResult:
    """mf_validate_config (through the registry, as every surface calls it) on ``table`` written
    to a file in the context's working folder."""
    path = write_config(table, ctx.cwd or Path.cwd(), name)
    result = call_tool("mf_validate_config", {"config_path": str(path), "schema": schema, **arguments}, ctx)
    assert isinstance(result, ValidateConfigResult), result
    return result


def first_error(report: ValidateConfigResult) -> tuple[str, str]:
    """(path, rule) of the first error."""
    assert report.errors, f"expected an error, got warnings {[(w.path, w.message) for w in report.warnings]}"
    return report.errors[0].path, report.errors[0].rule


def backend_warnings(report: ValidateConfigResult) -> list[Any]:
    """The warnings about the back-end itself (a fall-back, an interpreter that failed)."""
    return [w for w in report.warnings if w.rule.startswith("backend:")]
