"""tools.preflight over real HTTP against the emulator, with real files and real executables.

Programs on PATH are small shell scripts written to tmp folders: they are what the check
looks at (which ``prime`` comes first, what ``--version`` prints), not stand-ins.
"""

from __future__ import annotations

import http.server
import json
import os
import threading
from pathlib import Path

import pytest
from _helpers import script

from skill.emulator import DEFAULT_API_KEY, OTHER_API_KEY, TEAM_EVALS_ID, TEAM_RESEARCH_ID, EmulatorServer
from tools.core import Context
from tools.preflight import EMULATOR_API_KEY, PreflightInput, PreflightResult, preflight

UNUSED_TEAM = "c" + "z" * 24  # well-formed team id nobody belongs to


def run(env: dict[str, str], tmp_path: Path, **kw) -> PreflightResult:
    result = preflight(PreflightInput(**kw), Context(env=env, home=tmp_path / "home", state_dir=tmp_path / "state"))
    assert isinstance(result, PreflightResult), result
    return result


def by_name(report: PreflightResult) -> dict[str, object]:
    return {c.name: c for c in report.checks}


@pytest.fixture
def env(mf_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """The emulator env with a PATH holding only a good prime and uv (scripts)."""
    bin_dir = tmp_path / "bin"
    script(bin_dir, "prime", 'echo "Prime CLI version: 0.18.0"')
    script(bin_dir, "uv", 'echo "uv 0.13.9 (fake build)"')
    return {**mf_env, "PATH": str(bin_dir)}


def test_ok_path_with_a_team(env: dict[str, str], tmp_path: Path, emulator: EmulatorServer):
    report = run({**env, "PRIME_TEAM_ID": TEAM_RESEARCH_ID}, tmp_path)
    checks = by_name(report)
    assert report.ok and report.summary.startswith("Ready")
    for name in ("api_key", "config_file", "api_reachable", "api_key_valid", "owner", "traces_host", "prime_cli", "uv"):
        assert checks[name].ok is True, (name, checks[name])
    assert checks["prime_cli"].detail.startswith("prime 0.18.0")
    assert report.owner.team_id == TEAM_RESEARCH_ID and report.owner.team_name == "Emulator Research"
    assert report.owner.source == "PRIME_TEAM_ID" and report.launch_would_stop_ambiguous is False
    assert {t.team_id for t in report.teams} == {TEAM_RESEARCH_ID, TEAM_EVALS_ID}
    assert report.base_url == emulator.base_url and report.api_key_source == "env"
    assert report.user_id and report.user_id in checks["api_key_valid"].detail
    assert emulator.api_key not in report.model_dump_json()


def test_no_team_configured_is_ambiguous_but_not_blocking(env: dict[str, str], tmp_path: Path):
    report = run(env, tmp_path)
    owner = by_name(report)["owner"]
    assert report.ok and report.launch_would_stop_ambiguous is True
    assert owner.ok is False and owner.required is False and owner.code == "owner_ambiguous"
    assert "team set to personal" in owner.fix and report.owner.kind == "personal" and report.owner.source == "default"


def test_key_with_one_team_and_saved_team_from_config(env: dict[str, str], tmp_path: Path):
    home = tmp_path / "home"
    (home / ".prime").mkdir(parents=True)
    (home / ".prime" / "config.json").write_text(json.dumps({"team_id": TEAM_RESEARCH_ID, "team_name": "Saved"}))
    report = run({**env, "PRIME_API_KEY": OTHER_API_KEY}, tmp_path)
    assert report.ok and report.owner.team_id == TEAM_RESEARCH_ID
    assert report.owner.source == "~/.prime/config.json team_id"
    assert [t.team_id for t in report.teams] == [TEAM_RESEARCH_ID]


def test_configured_team_not_a_member(env: dict[str, str], tmp_path: Path):
    report = run({**env, "PRIME_TEAM_ID": UNUSED_TEAM}, tmp_path)
    owner = by_name(report)["owner"]
    assert not report.ok and owner.code == "team_not_member" and owner.required and "mf_list_teams" in owner.fix


def test_wrong_key(env: dict[str, str], tmp_path: Path):
    wrong = "fake-wrong-key-0123456789"
    report = run({**env, "PRIME_API_KEY": wrong}, tmp_path)
    checks = by_name(report)
    assert not report.ok
    assert checks["api_reachable"].ok is True
    assert checks["api_key_valid"].ok is False and checks["api_key_valid"].code == "api_key_invalid"
    assert "PRIME_API_KEY" in checks["api_key_valid"].fix and checks["owner"].ok is None
    assert report.summary.startswith("Not ready: api_key_valid")
    assert wrong not in report.model_dump_json()


def test_a_wrong_key_on_the_local_emulator_is_told_the_emulators_key(env: dict[str, str], tmp_path: Path):
    report = run({**env, "PRIME_API_KEY": "pit_FAKE_test_key"}, tmp_path)
    check = by_name(report)["api_key_valid"]
    assert (check.ok, check.code) == (False, "api_key_invalid")
    assert "local Model Factory emulator" in check.detail
    assert EMULATOR_API_KEY == DEFAULT_API_KEY and DEFAULT_API_KEY in check.fix and "banner" in check.fix
    assert "dashboard" not in check.fix and "pit_FAKE_test_key" not in report.model_dump_json()


def test_a_wrong_key_on_a_loopback_server_that_is_not_the_emulator_gets_the_platform_fix(env: dict[str, str],
                                                                                          tmp_path: Path):
    class Refuse(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # every path, the emulator's admin route included: 401 as a platform would
            body = b'{"detail": "Invalid API key"}'
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        report = run({**env, "PRIME_API_BASE_URL": url, "PRIME_TRACES_URL": url}, tmp_path)
    finally:
        server.shutdown()
        server.server_close()
    check = by_name(report)["api_key_valid"]
    assert (check.ok, check.code) == (False, "api_key_invalid") and "emulator" not in check.detail
    assert "dashboard" in check.fix and DEFAULT_API_KEY not in check.fix


def test_emulator_not_running(env: dict[str, str], tmp_path: Path):
    with EmulatorServer() as gone:
        dead_url = gone.base_url
    report = run({**env, "PRIME_API_BASE_URL": dead_url, "PRIME_TRACES_URL": dead_url}, tmp_path)
    checks = by_name(report)
    assert not report.ok
    assert checks["api_reachable"].ok is False and checks["api_reachable"].code == "api_unreachable"
    assert dead_url in checks["api_reachable"].detail and "PRIME_API_BASE_URL" in checks["api_reachable"].fix
    assert checks["api_key_valid"].ok is None and checks["traces_host"].ok is False
    assert checks["prime_cli"].ok is True  # local checks still run


def test_slow_api_is_bounded_by_the_timeout(env: dict[str, str], tmp_path: Path, emulator: EmulatorServer):
    emulator.faults.delay(3.0, "GET", "/user/whoami")
    report = run(env, tmp_path, timeout_seconds=0.5)
    assert by_name(report)["api_reachable"].code == "api_unreachable" and not report.ok


def test_server_error(env: dict[str, str], tmp_path: Path, emulator: EmulatorServer):
    emulator.faults.status(503, "GET", "/user/whoami", times=None)
    report = run(env, tmp_path)
    assert by_name(report)["api_reachable"].code == "api_error" and "503" in by_name(report)["api_reachable"].detail
    assert [r.hits for r in emulator.faults.rules()] == [1]  # one request, no retry storm


def test_no_key_reports_without_traceback(env: dict[str, str], tmp_path: Path):
    no_key = {k: v for k, v in env.items() if k != "PRIME_API_KEY"}
    report = run(no_key, tmp_path)
    checks = by_name(report)
    assert not report.ok and checks["api_key"].ok is False and checks["api_key"].code == "api_key_missing"
    assert "PRIME_API_KEY" in checks["api_key"].fix and report.api_key_source == "none"
    assert all(checks[n].ok is None for n in ("api_reachable", "api_key_valid", "owner", "traces_host"))
    assert report.summary.startswith("Not ready: api_key")


def test_local_only(env: dict[str, str], tmp_path: Path, emulator: EmulatorServer):
    report = run(env, tmp_path, check_api=False)
    checks = by_name(report)
    assert report.ok and "not checked" in report.summary and checks["api_reachable"].ok is None
    assert report.owner is not None and report.owner.kind == "personal" and report.launch_would_stop_ambiguous is None


def test_malformed_config_file(env: dict[str, str], tmp_path: Path):
    home = tmp_path / "home"
    (home / ".prime").mkdir(parents=True)
    (home / ".prime" / "config.json").write_text("{not json")
    report = run(env, tmp_path)
    config = by_name(report)["config_file"]
    assert not report.ok and config.ok is False and config.code == "config_invalid" and "config.json" in config.detail


def test_traces_host_down_does_not_block(env: dict[str, str], tmp_path: Path):
    with EmulatorServer() as gone:
        dead_url = gone.base_url
    report = run({**env, "PRIME_TRACES_URL": dead_url}, tmp_path)
    traces = by_name(report)["traces_host"]
    assert report.ok and traces.ok is False and traces.required is False and traces.code == "traces_unreachable"


# -- prime CLI, uv, prime-rl ------------------------------------------------------------


@pytest.mark.parametrize("scripts, code", [
    ({"a": 'echo "Prime CLI version: 0.18.3"'}, "ok"),
    ({"a": 'echo "Prime CLI version: 0.17.2"'}, "prime_version_unsupported"),
    ({"a": 'echo "prime 1.4 - prime number sieve"'}, "prime_not_prime_intellect"),
    ({"a": 'echo "Prime CLI version: 0.18.0"', "b": 'echo "Prime CLI version: 0.6.26"'}, "prime_shadowed"),
    ({"a": "echo boom >&2; exit 3"}, "prime_version_failed"),
    ({}, "prime_not_found"),
])
def test_prime_cli(scripts: dict[str, str], code: str, mf_env: dict[str, str], tmp_path: Path):
    folders = [tmp_path / folder for folder in scripts]
    for folder, body in zip(folders, scripts.values(), strict=True):
        script(folder, "prime", body)
    path = os.pathsep.join(str(f) for f in folders) or str(tmp_path / "empty")
    check = by_name(run({**mf_env, "PATH": path}, tmp_path, check_api=False))["prime_cli"]
    assert check.code == code and check.ok is (code == "ok") and check.required is False
    if code != "ok":
        assert check.fix
    if code == "prime_shadowed":
        assert str(folders[1] / "prime") in check.detail


def test_prime_cli_that_hangs_is_cut_off(mf_env: dict[str, str], tmp_path: Path):
    script(tmp_path / "slow", "prime", "exec /bin/sleep 5")
    check = by_name(run({**mf_env, "PATH": str(tmp_path / "slow")}, tmp_path, check_api=False,
                        timeout_seconds=0.3))["prime_cli"]
    assert check.code == "prime_version_failed" and "did not answer" in check.detail


def test_uv_and_prime_rl(env: dict[str, str], tmp_path: Path):
    checks = by_name(run(env, tmp_path, check_api=False))
    assert checks["uv"].ok and "0.13.9" in checks["uv"].detail
    assert checks["prime_rl_checkout"].ok is False and checks["prime_rl_checkout"].required is False
    ready = tmp_path / "home" / ".cache" / "prime" / "training-schemas" / "abc123"
    (ready / "bin").mkdir(parents=True)
    (ready / "bin" / "python").touch()
    assert by_name(run(env, tmp_path, check_api=False))["prime_rl_checkout"].ok is False  # a build not finished
    (ready / ".ready").touch()
    cached = by_name(run(env, tmp_path, check_api=False))["prime_rl_checkout"]
    assert cached.ok is True and "prime CLI schema cache" in cached.detail
    checkout = tmp_path / "prime-rl"
    (checkout / "packages" / "prime-rl-configs").mkdir(parents=True)
    other_cache = {**env, "XDG_CACHE_HOME": str(tmp_path / "nocache"), "PRIME_RL_DIR": str(checkout)}
    half = by_name(run(other_cache, tmp_path, check_api=False))["prime_rl_checkout"]
    assert half.ok is False and f"PRIME_RL_DIR={checkout} is not a prime-rl checkout" in half.detail
    (checkout / "packages" / "prime-rl-configs" / "pyproject.toml").write_text('[project]\nname = "x"\n')
    found = by_name(run(other_cache, tmp_path, check_api=False))["prime_rl_checkout"]
    assert found.ok is True and str(checkout) in found.detail and "checkout" in found.detail
    no_uv = by_name(run({**env, "PATH": str(tmp_path / "none")}, tmp_path, check_api=False))["uv"]
    assert no_uv.ok is False and no_uv.code == "uv_not_found"


def test_many_teams_are_capped(env: dict[str, str], tmp_path: Path, emulator: EmulatorServer):
    from skill.emulator.seed import DEFAULT_USER_ID, Team, cuid
    from tools.preflight import MAX_TEAMS_SHOWN

    emulator.state.seed.teams.extend(
        Team(cuid("bulk", i), f"Bulk {i}", f"bulk-{i}", "2026-01-01T00:00:00Z", {DEFAULT_USER_ID: "MEMBER"})
        for i in range(150))
    report = run(env, tmp_path)
    assert report.teams_total == 152 and len(report.teams) == MAX_TEAMS_SHOWN
    assert len(report.model_dump_json()) <= 8000
