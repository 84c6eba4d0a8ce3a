"""Fixtures for the schema tests: the real prime-rl schema environment and prime 0.18.0.

Import the fixtures into a test module (``from _schema_env import schema_python  # noqa: F401``).
The environments are built once and cached (benchmarks/_conformance/envs.py: the fixture's
``build-venv.sh --with-tasksets`` under ``~/.cache/model-factory-skill/prime-rl-schema-<hash>``,
about 15 s with a warm package cache). Without ``../shared/fixtures/prime-rl-schema``, uv or
the package registry the tests skip and say why, unless ``MF_REQUIRE_SCHEMA=1`` (set by
``.ci/run``), which turns that into a failure.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from benchmarks._conformance import envs


def unavailable(reason: str) -> None:
    """Skip, or fail when ``MF_REQUIRE_SCHEMA=1`` (CI: these tests must run there)."""
    if os.environ.get("MF_REQUIRE_SCHEMA") == "1":
        pytest.fail(f"real prime-rl schema required but unavailable: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def schema_python() -> Path:
    """``bin/python`` of the fixture's prime-rl schema environment (with the four tasksets)."""
    try:
        return envs.schema_python(tasksets=True)
    except envs.EnvironmentUnavailable as exc:
        unavailable(str(exc))
        raise  # unreachable: unavailable() skips or fails


@pytest.fixture(scope="session")
def prime_python() -> Path:
    """``bin/python`` of the prime 0.18.0 environment (the reference's CLI code)."""
    try:
        return envs.prime_python()
    except envs.EnvironmentUnavailable as exc:
        unavailable(str(exc))
        raise


@pytest.fixture(scope="session")
def hosted_column() -> dict[str, bool]:
    """The fixture's PROVENANCE.md, column "as prime train validate 0.18.0 runs it": example id
    (``basic/reverse-text/rl``) -> accepted."""
    table = envs.fixture_dir() / "PROVENANCE.md"
    if not table.is_file():
        unavailable(f"no {table}")
    verdicts = {}
    for line in table.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].endswith(".toml"):
            verdicts[re.sub(r"\.toml$", "", cells[0])] = cells[3].startswith("ok")
    assert len(verdicts) == 10, f"expected 10 examples in {table}, found {sorted(verdicts)}"
    return verdicts
