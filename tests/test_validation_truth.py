"""Validation that tells the truth: a verdict no schema reached is never a pass, cross-field
rejections name the keys and numbers they compare, a missing taskset switches off only the
checks that need it, unknown ids are named, SFT online-eval blocks are checked, and the real
back-end never judges with a schema the checkout no longer has.

Real files in tmp folders, mf_validate_config through the registry (as every surface calls it);
the real schema from the fixture's environment (tests/_schema_env.py) and a real git checkout
copied from ../shared/fixtures/prime-rl-schema.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _helpers import EXAMPLE, call, cli, cli_json, err

from skill.registry import call_tool
from tools.configs import ValidationReport
from tools.core import Context

pytest_plugins = ["_schema_env"]


def validate(ctx: Context, path: Path, **arguments: object) -> ValidationReport:
    result = call_tool("mf_validate_config", {"config_path": str(path), **arguments}, ctx)
    assert isinstance(result, ValidationReport), result
    return result


# --- 17. a structural verdict (no schema judged the file) is never valid: true ---------------------


@pytest.fixture
def broken_snapshot(monkeypatch: pytest.MonkeyPatch) -> None:
    """The snapshot itself fails (a defect here, not in the config): only our rules can run."""
    import tools.configs._schema_backends as backends

    def fail(mode: str) -> None:
        raise RuntimeError("snapshot unreadable")

    monkeypatch.setattr(backends, "snapshot_schema", fail)


def test_a_file_no_schema_judged_is_not_valid_but_null(broken_snapshot: None, schema_ctx: Context,
                                                       tmp_path: Path) -> None:
    path = tmp_path / "rl.toml"
    path.write_text(EXAMPLE.read_text().replace("batch_size = 128", "batch_size = 100"))  # the schema rejects it
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
    path.write_text(EXAMPLE.read_text())
    env = {**frozen_ctx.env, "HOME": str(tmp_path)}
    code, body = cli_json("validate-config", path, "--schema", "snapshot", env=env, cwd=tmp_path)
    assert code == 1 and body["valid"] is None
    person = cli("validate-config", path, "--schema", "snapshot", env=env, cwd=tmp_path)
    assert person.returncode == 1 and "not judged by a schema" in person.stderr + person.stdout
    assert "plan-run" not in person.stderr + person.stdout
    refused = err(call(frozen_ctx, "mf_plan_run", config_path=str(path), team="personal"), "invalid_config")
    assert "not judged by a schema" in refused.message and "schema=" in refused.fix.replace(" ", "")
