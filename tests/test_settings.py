"""``resolve_settings``: the ``prime`` 0.18.0 precedence (reference §1.1-1.2), read-only."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tools.platform.client import PlatformClient, TracesClient
from tools.platform.settings import (
    DEFAULT_BASE_URL,
    DEFAULT_FRONTEND_URL,
    DEFAULT_TRACES_URL,
    looks_like_team_id,
    resolve_settings,
    strip_api_v1,
)

TEAM_A = "cteam0000000000000000000001"
TEAM_B = "cteam0000000000000000000002"
KEY_FILE = "fake-config-key"
KEY_CTX = "fake-context-key"
KEY_ENV = "fake-env-key"


def write(home: Path, rel: str, data) -> Path:
    path = home / ".prime" / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data, indent=2))
    return path


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root``: file bytes, or None for a directory (with its mode)."""
    out: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        out[rel] = path.read_bytes() if path.is_file() else None
        out[rel + "#mode"] = str(path.stat().st_mode).encode()
    return out


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


@pytest.fixture
def configured(home: Path) -> Path:
    write(
        home,
        "config.json",
        {
            "api_key": KEY_FILE,
            "team_id": TEAM_A,
            "team_name": "Research",
            "team_role": "ADMIN",
            "user_id": "cmusr-file",
            "base_url": "https://staging.example.invalid/api/v1/",
            "frontend_url": "https://app.staging.example.invalid/",
            "traces_url": "https://traces.example.invalid/api/v1",
            "current_environment": "staging",
            "inference_url": "https://inference.example.invalid",
            "unknown_key": "dropped",
        },
    )
    return home


# -- defaults and the config file ------------------------------------------------------------


def test_defaults_without_any_file(home):
    s = resolve_settings(env={}, home=home)
    assert s.api_key.get_secret_value() == "" and s.api_key_source == "none" and not s.has_api_key
    assert (s.team_id, s.team_id_source, s.saved_team_id, s.team_name) == (None, "none", None, None)
    assert (s.base_url, s.base_url_source) == (DEFAULT_BASE_URL, "default")
    assert (s.traces_url, s.traces_url_source) == (DEFAULT_TRACES_URL, "default")
    assert s.frontend_url == DEFAULT_FRONTEND_URL
    assert s.user_id is None and s.context_name is None and s.current_environment == "production"
    assert s.config_path == home / ".prime" / "config.json"
    assert s.config_error is None and s.context_error is None
    assert not (home / ".prime").exists()


def test_config_file_values_and_normalisation(configured):
    s = resolve_settings(env={}, home=configured)
    assert (s.api_key.get_secret_value(), s.api_key_source) == (KEY_FILE, "config")
    assert (s.team_id, s.team_id_source, s.saved_team_id, s.team_name) == (TEAM_A, "config", TEAM_A, "Research")
    assert (s.base_url, s.base_url_source) == ("https://staging.example.invalid", "config")
    assert (s.traces_url, s.traces_url_source) == ("https://traces.example.invalid", "config")
    assert s.frontend_url == "https://app.staging.example.invalid"
    assert s.user_id == "cmusr-file" and s.current_environment == "staging"


def test_home_defaults_to_env_home(configured):
    s = resolve_settings(env={"HOME": str(configured)})
    assert s.api_key_source == "config" and s.config_path == configured / ".prime" / "config.json"


# -- environment precedence ------------------------------------------------------------------


def test_env_api_key_wins_and_empty_env_key_is_ignored(configured):
    assert resolve_settings(env={"PRIME_API_KEY": KEY_ENV}, home=configured).api_key_source == "env"
    s = resolve_settings(env={"PRIME_API_KEY": ""}, home=configured)
    assert (s.api_key.get_secret_value(), s.api_key_source) == (KEY_FILE, "config")


def test_env_team_overrides_and_keeps_the_saved_team_visible(configured):
    s = resolve_settings(env={"PRIME_TEAM_ID": TEAM_B}, home=configured)
    assert (s.team_id, s.team_id_source, s.saved_team_id) == (TEAM_B, "env", TEAM_A)
    assert s.team_name is None  # the saved name describes another team


def test_env_team_equal_to_saved_keeps_the_name(configured):
    s = resolve_settings(env={"PRIME_TEAM_ID": TEAM_A}, home=configured)
    assert (s.team_id_source, s.team_name) == ("env", "Research")


@pytest.mark.parametrize("blank", ["", " ", "\t\n"])
def test_blank_env_team_is_ignored(configured, blank):
    s = resolve_settings(env={"PRIME_TEAM_ID": blank}, home=configured)
    assert (s.team_id, s.team_id_source) == (TEAM_A, "config")


def test_env_team_is_used_stripped(home):
    s = resolve_settings(env={"PRIME_TEAM_ID": f"  {TEAM_B} "}, home=home)
    assert (s.team_id, s.team_id_source, s.saved_team_id) == (TEAM_B, "env", None)


def test_blank_env_team_without_file_team_is_personal(home):
    s = resolve_settings(env={"PRIME_TEAM_ID": "   "}, home=home)
    assert (s.team_id, s.team_id_source) == (None, "none")


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"PRIME_API_BASE_URL": "http://127.0.0.1:8000/api/v1/"}, "http://127.0.0.1:8000"),
        ({"PRIME_API_BASE_URL": "http://a.invalid", "PRIME_BASE_URL": "http://b.invalid"}, "http://a.invalid"),
        ({"PRIME_BASE_URL": "http://b.invalid/"}, "http://b.invalid"),
        ({"PRIME_API_BASE_URL": "", "PRIME_BASE_URL": "http://b.invalid/api/v1"}, "http://b.invalid"),
        ({"PRIME_API_BASE_URL": "http://h.invalid/prefix/api/v1"}, "http://h.invalid/prefix"),
    ],
)
def test_base_url_env_precedence_and_normalisation(configured, env, expected):
    s = resolve_settings(env=env, home=configured)
    assert (s.base_url, s.base_url_source) == (expected, "env")


def test_traces_url_env_then_file_then_default_never_base_url(home):
    env = {"PRIME_API_BASE_URL": "http://127.0.0.1:9/api/v1"}
    s = resolve_settings(env=env, home=home)
    assert (s.traces_url, s.traces_url_source) == (DEFAULT_TRACES_URL, "default")
    write(home, "config.json", {"traces_url": "http://t.invalid/api/v1/"})
    assert resolve_settings(env=env, home=home).traces_url == "http://t.invalid"
    s = resolve_settings(env={**env, "PRIME_TRACES_URL": "http://e.invalid/api/v1"}, home=home)
    assert (s.traces_url, s.traces_url_source) == ("http://e.invalid", "env")


def test_user_id_env_wins_even_empty(configured):
    assert resolve_settings(env={"PRIME_USER_ID": ""}, home=configured).user_id == ""
    assert resolve_settings(env={"PRIME_USER_ID": "u9"}, home=configured).user_id == "u9"


def test_frontend_url_env(configured):
    s = resolve_settings(env={"PRIME_FRONTEND_URL": "http://f.invalid/"}, home=configured)
    assert s.frontend_url == "http://f.invalid"


# -- contexts -------------------------------------------------------------------------------


@pytest.fixture
def with_context(configured):
    write(
        configured,
        "environments/dev-1.json",
        {
            "api_key": KEY_CTX,
            "team_id": TEAM_B,
            "team_name": "Dev",
            "user_id": "cmusr-ctx",
            "base_url": "http://dev.invalid/api/v1",
            "frontend_url": "http://app.dev.invalid/",
            "traces_url": "http://traces.dev.invalid/",
        },
    )
    write(configured, "environments/nokey.json", {"base_url": "http://nokey.invalid"})
    return configured


def test_prime_context_loads_the_context_in_memory(with_context):
    s = resolve_settings(env={"PRIME_CONTEXT": "dev-1"}, home=with_context)
    assert (s.api_key.get_secret_value(), s.api_key_source) == (KEY_CTX, "context")
    assert (s.team_id, s.team_id_source, s.saved_team_id, s.team_name) == (TEAM_B, "context", TEAM_B, "Dev")
    assert (s.base_url, s.base_url_source) == ("http://dev.invalid", "context")
    assert (s.traces_url, s.traces_url_source) == ("http://traces.dev.invalid", "context")
    assert s.frontend_url == "http://app.dev.invalid" and s.user_id == "cmusr-ctx"
    assert s.context_name == "dev-1" and s.context_error is None


def test_context_argument_beats_prime_context(with_context):
    s = resolve_settings(env={"PRIME_CONTEXT": "nokey"}, home=with_context, context="dev-1")
    assert s.context_name == "dev-1" and s.base_url == "http://dev.invalid"


def test_context_without_key_keeps_the_file_key_and_resets_the_rest(with_context):
    s = resolve_settings(env={}, home=with_context, context="nokey")
    assert (s.api_key.get_secret_value(), s.api_key_source) == (KEY_FILE, "config")
    assert (s.team_id, s.team_id_source) == (None, "none")  # the context has no team: personal
    assert s.base_url == "http://nokey.invalid" and s.traces_url == DEFAULT_TRACES_URL
    assert s.frontend_url == DEFAULT_FRONTEND_URL and s.user_id is None


def test_env_beats_context(with_context):
    env = {"PRIME_CONTEXT": "dev-1", "PRIME_API_KEY": KEY_ENV, "PRIME_TEAM_ID": TEAM_A, "PRIME_API_BASE_URL": "http://e.invalid"}
    s = resolve_settings(env=env, home=with_context)
    assert (s.api_key_source, s.team_id, s.team_id_source, s.saved_team_id) == ("env", TEAM_A, "env", TEAM_B)
    assert (s.base_url, s.base_url_source) == ("http://e.invalid", "env")


@pytest.mark.parametrize("name", ["production", "Production", "PRODUCTION"])
def test_production_context_resets_urls_and_team(with_context, name):
    s = resolve_settings(env={"PRIME_CONTEXT": name}, home=with_context)
    assert (s.base_url, s.base_url_source) == (DEFAULT_BASE_URL, "default")
    assert (s.traces_url, s.frontend_url) == (DEFAULT_TRACES_URL, DEFAULT_FRONTEND_URL)
    assert (s.team_id, s.team_id_source, s.saved_team_id, s.team_name) == (None, "none", None, None)
    assert (s.api_key.get_secret_value(), s.api_key_source) == (KEY_FILE, "config")  # the key stays
    assert s.user_id == "cmusr-file" and s.context_name == name


def test_unknown_context_is_reported_and_not_applied(with_context):
    s = resolve_settings(env={"PRIME_CONTEXT": "missing"}, home=with_context)
    assert "unknown context 'missing'" in s.context_error
    assert s.context_name is None and s.base_url == "https://staging.example.invalid" and s.team_id == TEAM_A


@pytest.mark.parametrize("name", ["../config", "a/b", "dev.1", "spaced name"])
def test_invalid_context_names_are_refused(with_context, name):
    s = resolve_settings(env={}, home=with_context, context=name)
    assert "invalid context name" in s.context_error and s.context_name is None


@pytest.mark.parametrize("text", ["{not json", "[1, 2]"])
def test_malformed_context_file(with_context, text):
    write(with_context, "environments/broken.json", text)
    s = resolve_settings(env={}, home=with_context, context="broken")
    assert s.context_error and "broken.json" in s.context_error and s.context_name is None
    assert s.api_key_source == "config"


# -- malformed config -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("{not json", "invalid JSON"),
        ("[]", "expected a JSON object"),
        ('"text"', "expected a JSON object"),
        ('{"api_key": 123}', "api_key must be a string"),
        ('{"team_id": ["x"]}', "team_id must be a string or null"),
        ('{"base_url": null}', "base_url must be a string"),
    ],
)
def test_malformed_config_is_reported_and_treated_as_empty(home, text, fragment):
    write(home, "config.json", text)
    s = resolve_settings(env={"PRIME_API_KEY": KEY_ENV}, home=home)
    assert fragment in s.config_error
    assert s.api_key_source == "env" and s.team_id is None and s.base_url == DEFAULT_BASE_URL


def test_unreadable_config_is_reported(home):
    path = write(home, "config.json", "{}")
    path.write_bytes(b"\xff\xfe\x00 not utf-8")
    assert "cannot read" in resolve_settings(env={}, home=home).config_error


# -- the key never shows --------------------------------------------------------------------


def test_key_never_shows_in_repr_or_dumps(configured):
    s = resolve_settings(env={"PRIME_API_KEY": KEY_ENV}, home=configured)
    for text in (repr(s), str(s), s.model_dump_json(), json.dumps(s.model_dump(mode="json")), str(s.model_dump())):
        assert KEY_ENV not in text and KEY_FILE not in text
    assert s.api_key.get_secret_value() == KEY_ENV


# -- read-only ------------------------------------------------------------------------------


def test_resolving_and_using_clients_writes_nothing(with_context):
    root = with_context.parent
    before = snapshot(root)
    env = {"PRIME_CONTEXT": "dev-1", "PRIME_TEAM_ID": "  "}
    for ctx in (None, "nokey", "production", "missing", "../x"):
        resolve_settings(env=env, home=with_context, context=ctx)
    settings = resolve_settings(env=env, home=with_context)
    empty = {"gpuTypes": [], "items": [], "next_cursor": None}
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json=empty))
    with PlatformClient(settings, transport=transport) as platform, \
            TracesClient(settings, transport=transport) as traces:
        platform.list_gpu_types()
        traces.list_traces()
    assert snapshot(root) == before


def test_a_home_without_prime_stays_without_it(home):
    settings = resolve_settings(env={"PRIME_API_KEY": KEY_ENV}, home=home)
    PlatformClient(settings).close()
    TracesClient(settings).close()
    assert list(home.iterdir()) == []


# -- helpers --------------------------------------------------------------------------------


def test_helpers():
    assert strip_api_v1("https://x.invalid/api/v1/") == "https://x.invalid"
    assert strip_api_v1("https://x.invalid//") == "https://x.invalid"
    assert looks_like_team_id("c" + "a1" * 12) and not looks_like_team_id("team-1") and not looks_like_team_id(None)
    # The reference's fake team ids (27 chars) do NOT match the CLI's set-team-id pattern
    # (c + 24): nothing may reject a team id on that pattern alone.
    assert not looks_like_team_id(TEAM_A)
