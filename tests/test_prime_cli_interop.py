"""The real ``prime`` CLI 0.18.0 against the emulator: its commands must work and parse.

``prime`` lives in its own virtual environment, never in the project's dependencies: it is
built once (``uv venv`` + ``uv pip install prime==0.18.0``) under
``~/.cache/model-factory-skill/prime-0.18.0`` (override with ``MF_PRIME_VENV``) and reused, by
the one builder the schema tests and the conformance benchmark use too
(benchmarks/_conformance/envs.py).
Without uv, or when the install fails (no package registry), the tests skip and say why,
unless ``MF_REQUIRE_INTEROP=1`` (set by ``.ci/run``), which turns that into a failure.
The CLI runs with a temporary ``HOME``, ``PRIME_DISABLE_VERSION_CHECK=1`` and the emulator's
URLs, so it reaches nothing beyond loopback.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
from _helpers import emulator_env, unavailable
from conftest import Recorder

from benchmarks._conformance import envs
from skill.emulator import TEAM_RESEARCH_ID, EmulatorServer, Timing
from skill.registry import call_tool
from tools.configs import ValidateConfigResult
from tools.core import Context
from tools.platform import wire

#: One worker runs this module: its module fixtures are costly, and xdist would otherwise build them once per worker.
pytestmark = [pytest.mark.interop, pytest.mark.xdist_group("test_prime_cli_interop")]

T = Timing()


def _version_ok(exe: Path) -> bool:
    try:
        out = subprocess.run([str(exe), "--version"], check=False, capture_output=True, text=True, timeout=60,
                             env={**os.environ, "PRIME_DISABLE_VERSION_CHECK": "1"})
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and envs.PRIME_VERSION in out.stdout


@pytest.fixture(scope="session")
def prime_exe() -> Path:
    """The ``prime`` 0.18.0 executable, installed once into its own venv."""
    try:
        python = envs.prime_python()
    except envs.EnvironmentUnavailable as exc:
        unavailable(str(exc), "MF_REQUIRE_INTEROP")
    exe = python.parent / ("prime.exe" if os.name == "nt" else "prime")
    if not _version_ok(exe):
        unavailable(f"prime {envs.PRIME_VERSION} installed but does not run from {exe}", "MF_REQUIRE_INTEROP")
    return exe


@pytest.fixture(scope="module")
def prime_env(module_emulator: EmulatorServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("prime-home")
    return emulator_env(module_emulator, PRIME_DISABLE_VERSION_CHECK="1", HOME=str(home),
                        XDG_CACHE_HOME=str(home / ".cache"), PATH=os.environ.get("PATH", ""), COLUMNS="200",
                        NO_COLOR="1")


@pytest.fixture(scope="module")
def prime(prime_exe: Path, prime_env: dict[str, str]):
    """Run ``prime ARGS`` against the emulator; returns the CompletedProcess (text)."""

    def run(*args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([str(prime_exe), *args], check=False, capture_output=True, text=True,
                              env=prime_env, timeout=120)
        if ok:
            assert done.returncode == 0, f"prime {' '.join(args)} -> {done.returncode}\n{done.stdout}\n{done.stderr}"
        return done

    return run


def as_json(done: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def dispatched(prime, module_emulator: EmulatorServer, examples_dir: Path,
               tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``prime train run rl.toml -y -o json`` on a copy of the reverse-text example; then the
    clock is moved until the run has COMPLETED."""
    folder = tmp_path_factory.mktemp("config")
    config = folder / "rl.toml"
    shutil.copyfile(examples_dir / "basic" / "reverse-text" / "rl.toml", config)
    done = prime("train", "run", str(config), "-y", "-o", "json")
    result = as_json(done)
    run_id = result["run"]["runId"]
    status_at_dispatch = module_emulator.state.run(run_id).status
    module_emulator.state.advance(T.queue_seconds + T.startup_seconds + 20 * T.step_seconds + T.finalize_seconds
                         + T.checkpoint_upload_seconds + 1)
    return {"result": result, "run_id": run_id, "config": tomllib.loads(config.read_text()),
            "status_at_dispatch": status_at_dispatch}


def test_train_run_dispatches_with_the_on_demand_placement(dispatched: dict, module_emulator: EmulatorServer) -> None:
    run = dispatched["result"]["run"]
    assert run == {"runId": dispatched["run_id"], "onDemand": True, "gpuType": "H200_141GB", "pricePerGpuHour": 2.5,
                   "estimatedCostPerHour": 5.0, "isBeta": True}
    assert dispatched["status_at_dispatch"] == "QUEUED"
    sim = module_emulator.state.run(dispatched["run_id"])
    assert sim.config == dispatched["config"]  # the whole TOML travels as `config`
    assert (sim.spec.base_model, sim.spec.max_steps, sim.placement.team_id) == \
        ("PrimeIntellect/Qwen3-0.6B-Reverse-Text-SFT", 20, None)
    assert module_emulator.state.summary()["run_count"] == 1


def test_train_list_and_get(prime, dispatched: dict) -> None:
    listed = as_json(prime("train", "list", "-o", "json"))
    assert (listed["total"], listed["page"], listed["per_page"]) == (1, 1, 20)
    run = listed["runs"][0]
    assert (run["id"], run["status"], run["base_model"], run["kind"]) == \
        (dispatched["run_id"], "COMPLETED", "PrimeIntellect/Qwen3-0.6B-Reverse-Text-SFT", "DEDICATED_FULL_FT")
    got = as_json(prime("train", "get", dispatched["run_id"], "-o", "json"))["run"]
    assert (got["id"], got["status"], got["max_steps"], got["batch_size"], got["rollouts_per_example"],
            got["gpu_count"], got["failure_analysis"]) == (dispatched["run_id"], "COMPLETED", 20, 128, 16, 2, None)
    assert got["environments"][0]["id"] == "reverse-text"
    assert got["run_config"] == dispatched["config"]


def test_train_get_unknown_run_fails_with_the_platform_message(prime) -> None:
    done = prime("train", "get", "cnosuchrun000000000000000", "-o", "json", ok=False)
    assert done.returncode == 1 and "Run not found" in done.stdout + done.stderr


def test_train_metrics_and_progress(prime, dispatched: dict) -> None:
    metrics = as_json(prime("train", "metrics", dispatched["run_id"]))["metrics"]
    assert [m["step"] for m in metrics] == list(range(1, 21))
    assert all(0 <= m["reward/all/mean"] <= 1 for m in metrics)
    window = as_json(prime("train", "metrics", dispatched["run_id"], "--min-step", "3", "--max-step", "4"))
    assert [m["step"] for m in window["metrics"]] == [3, 4]
    progress = as_json(prime("train", "progress", dispatched["run_id"]))
    assert progress["latest_step"] == 20 and progress["steps_with_samples"] == [5, 10, 15, 20]
    assert progress["last_updated_at"] == metrics[-1]["timestamp"]


def test_train_checkpoints(prime, dispatched: dict) -> None:
    checkpoints = as_json(prime("train", "checkpoints", dispatched["run_id"], "-o", "json"))["checkpoints"]
    assert [(c["step"], c["status"], c["rft_run_id"]) for c in checkpoints] == [(20, "READY", dispatched["run_id"])]
    assert checkpoints[0]["storage_url"].endswith("/step_20")


def test_train_logs(prime, dispatched: dict) -> None:
    out = prime("train", "logs", dispatched["run_id"]).stdout
    assert "Step 20/20" in out and "Training finished after 20 steps" in out
    assert '"type":"progress"' not in out  # the CLI parsed our JSON lines (and hid progress lines)
    trainer = prime("train", "logs", dispatched["run_id"], "-c", "trainer", "-n", "5").stdout
    assert "loss" in trainer
    warnings = prime("train", "logs", dispatched["run_id"], "--level", "warning", "--since", "24h").stdout
    assert "Slow rollout batch at step 7" in warnings and "Step 20/20" not in warnings


def test_train_components(prime, dispatched: dict) -> None:
    out = prime("train", "components", dispatched["run_id"]).stdout
    rows = [line for line in out.splitlines() if "orchestrator" in line or "env-server" in line]
    assert any("orchestrator" in r and "COMPLETED" in r for r in rows)
    assert any("env-server" in r and "reverse-text" in r and "Completed" in r for r in rows)


def test_traces_list_and_raw_download(prime, dispatched: dict, module_emulator: EmulatorServer,
                                      tmp_path: Path) -> None:
    page = as_json(prime("traces", "list", "--run-id", dispatched["run_id"], "-o", "json"))
    assert len(page["items"]) == 20 and page["next_cursor"]
    assert {t["run_id"] for t in page["items"]} == {dispatched["run_id"]}
    assert {t["context"]["run_type"] for t in page["items"]} == {"train"}
    assert {t["run_step"] for t in page["items"]} == {20, 19}  # newest first, 16 traces a step
    trace_id = page["items"][0]["trace_id"]
    dest = tmp_path / "trace.json"
    written = as_json(prime("traces", "get", trace_id, "--raw", "--dest", str(dest), "-o", "json"))
    stored = module_emulator.state.store.traces[trace_id].raw
    assert written == {"dest": str(dest), "bytes_written": len(stored)}
    assert dest.read_bytes() == stored
    assert json.loads(stored)["id"] == trace_id


# -- mf_validate_config(schema="prime") runs this CLI ------------------------------------------------


def test_schema_prime_runs_prime_train_validate_and_falls_back_to_the_snapshot_when_offline(
        prime_exe: Path, module_emulator: EmulatorServer, examples_dir: Path, tmp_path: Path) -> None:
    """Offline (as here), `prime train validate` asks the platform for the runtime and then cannot
    build its schema venv: the snapshot decides and the report says why. uv's downloads go to a
    closed loopback port (the CLI passes the proxy variables on), so nothing leaves the machine."""
    recorder = Recorder.install(module_emulator)
    home = tmp_path / "home"
    home.mkdir()
    uv = shutil.which("uv")
    if uv is None:
        unavailable("uv is not on PATH", "MF_REQUIRE_INTEROP")
    env = emulator_env(module_emulator, HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"),
                       PATH=os.pathsep.join([str(prime_exe.parent), str(Path(uv).parent), "/usr/bin", "/bin"]),
                       HTTPS_PROXY="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9",
                       NO_PROXY="127.0.0.1,localhost")
    ctx = Context(env=env, home=home, cwd=tmp_path, state_dir=tmp_path / "state")
    for example, mode in (("basic/reverse-text/rl", "rl"), ("basic/wordle/sft", "sft")):
        config = tmp_path / f"{mode}.toml"
        shutil.copyfile(examples_dir / f"{example}.toml", config)
        report = call_tool("mf_validate_config", {"config_path": str(config), "schema": "prime",
                                                  "image_tag": "v0.5.0", "source_ref": "main"}, ctx)
        assert isinstance(report, ValidateConfigResult), report
        assert (report.schema_check, report.fallback_from, report.valid) == ("snapshot", "prime", True)
        [warning] = [w for w in report.warnings if w.rule.startswith("backend:")]
        assert warning.rule == "backend:prime_no_environment"
        assert "Could not build local schema environment" in warning.message and "snapshot" in warning.message
        prepare = recorder.bodies("POST", "/training/runs/prepare")[-1]
        assert (prepare["mode"], prepare["imageTag"], prepare["sourceRef"]) == (mode, "v0.5.0", "main")


# -- volumes: prime volumes ls / du / get against the emulator's volume storage ------------------------------


@pytest.fixture(scope="module")
def on_volume(module_emulator: EmulatorServer, prime_env: dict[str, str], examples_dir: Path,
              tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A run of the research team on its volume ``research-data``, ended and synced; the env for ``prime`` acting
    for that team, and a Context on the emulator."""
    home = tmp_path_factory.mktemp("mf-home")
    ctx = Context(env={**emulator_env(module_emulator), "HOME": str(home)}, home=home,
                  state_dir=home / "state", cwd=home)
    config = tomllib.loads((examples_dir / "basic" / "reverse-text" / "rl.toml").read_text())
    body = wire.build_create_body(config, name="on-volume", team_id=TEAM_RESEARCH_ID, volume="research-data")
    run_id = ctx.platform().create_run(body).run_id
    module_emulator.state.advance(T.queue_seconds + T.startup_seconds + 20 * T.step_seconds + T.finalize_seconds
                                  + T.checkpoint_upload_seconds + T.volume_sync_seconds + 1)
    return {"run_id": run_id, "env": {**prime_env, "PRIME_TEAM_ID": TEAM_RESEARCH_ID}, "ctx": ctx,
            "path": f"runs/{run_id}/checkpoints/step_20/"}


def _prime_volumes(prime_exe: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(prime_exe), "volumes", *args], check=False, capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, f"prime volumes {' '.join(args)} -> {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


def _tree(root: Path) -> dict[str, tuple[bytes, int]]:
    return {p.relative_to(root).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns // 10**6) for p in root.rglob("*")
            if p.is_file() and ".model-factory" not in p.relative_to(root).parts}


def test_prime_volumes_ls_lists_what_our_listing_lists(prime_exe: Path, on_volume: dict[str, Any]) -> None:
    env, path = on_volume["env"], on_volume["path"]
    top = _prime_volumes(prime_exe, env, "ls", "research-data", path).stdout.split()
    assert top == ["orchestrator/", "trainer/"]
    files = json.loads(_prime_volumes(prime_exe, env, "ls", "-R", "-o", "json", "research-data", path).stdout)
    theirs = {f["path"]: f["size"] for f in files if f["type"] == "file"}
    ours = call_tool("mf_list_volumes", {"team": TEAM_RESEARCH_ID, "volume": "research-data",
                                         "path": path + "trainer/"}, on_volume["ctx"])
    assert {e.name: e.size_bytes for e in ours.listing.entries} == \
        {k: v for k, v in theirs.items() if k.startswith(path + "trainer/")}
    du = _prime_volumes(prime_exe, env, "du", "research-data", path).stdout
    assert du.startswith(f"{sum(theirs.values())} bytes in {len(theirs)} objects")


def test_prime_volumes_get_and_download_checkpoint_write_the_same_files(
        prime_exe: Path, on_volume: dict[str, Any], tmp_path: Path) -> None:
    env, path, run_id = on_volume["env"], on_volume["path"], on_volume["run_id"]
    done = _prime_volumes(prime_exe, env, "get", "research-data", path, str(tmp_path / "prime"))
    assert "Downloading from research-data: 5 files" in done.stdout
    result = call_tool("mf_download_checkpoint", {"run_id": run_id, "dest": str(tmp_path / "ours")}, on_volume["ctx"])
    assert result.files == 5 and result.md5_verified == 5, result
    assert _tree(tmp_path / "prime") == _tree(tmp_path / "ours")  # same bytes, same restored mtimes


def test_prime_volumes_get_falls_back_to_a_session_when_the_route_is_missing(
        prime_exe: Path, on_volume: dict[str, Any], module_emulator: EmulatorServer, tmp_path: Path) -> None:
    """The old-backend case both clients meet: a 404 route. prime turns to an SSH session (none here); our tool
    says to use prime."""
    module_emulator.faults.status(404, "POST", "/training/volumes/*/transfer", times=None)
    try:
        done = subprocess.run([str(prime_exe), "volumes", "get", "research-data", on_volume["path"],
                               str(tmp_path / "p")], check=False, capture_output=True, text=True,
                              env=on_volume["env"], timeout=120)
        ours = call_tool("mf_download_checkpoint", {"run_id": on_volume["run_id"], "dest": str(tmp_path / "o")},
                         on_volume["ctx"])
    finally:
        module_emulator.faults.clear()
    assert done.returncode == 1, done.stdout + done.stderr
    assert ours.code == "transfer_unavailable" and "prime volumes get research-data" in ours.fix
