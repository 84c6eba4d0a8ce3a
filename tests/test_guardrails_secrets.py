"""Secrets by name: env files (the CLI's rules), forwarding refusals, detection, scrubbing.

Every secret-looking literal here is fake and says so on its line.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest
from pydantic import BaseModel, ConfigDict, SecretStr

from tools.configs import EXAMPLES_DIR
from tools.core import Context
from tools.errors import FieldProblem, ToolError, ToolFailure
from tools.guardrails.scrubbing import MEMO_CHARS, MEMO_ENTRIES, Scrubber
from tools.guardrails.secret_detection import (
    FORWARDABLE,
    EnvFileError,
    find_secret_values,
    parse_env_file,
    refuse_secret_values,
    resolve_forwarded,
    scan_for_secrets,
    toml_env_files,
    wire_secrets,
)

EXAMPLES = EXAMPLES_DIR
CANARY = "canary-value-0123456789"
HF_FAKE = "hf_FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE00"  # fake
WANDB_FAKE = "0123456789abcdef0123456789abcdef01234567"  # fake 40-hex W&B key


def env_file(tmp_path: Path, text: str, name: str = "secrets.env") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def failure(exc_info: pytest.ExceptionInfo[ToolFailure]) -> ToolError:
    return exc_info.value.error


def text_of(err: ToolError) -> str:
    return err.model_dump_json()


# ------------------------------------------------------------------ env-file rules (CLI)


def test_env_file_key_value_with_whitespace_stripped(tmp_path):
    p = env_file(tmp_path, "  WANDB_API_KEY =  canary-wandb-1  \nHF_TOKEN=canary-hf-2\n")
    assert parse_env_file(p, {}).values == {"WANDB_API_KEY": "canary-wandb-1", "HF_TOKEN": "canary-hf-2"}


def test_env_file_comments_and_blank_lines_are_skipped(tmp_path):
    p = env_file(tmp_path, "# a comment\n\n   # indented comment\n\t\nA=1\n")
    parsed = parse_env_file(p, {})
    assert parsed.values == {"A": "1"} and parsed.warnings == []


def test_env_file_hash_after_value_is_part_of_the_value(tmp_path):
    # The CLI has no inline comments: only lines *starting* with # are comments.
    assert parse_env_file(env_file(tmp_path, "A=b # c\n"), {}).values == {"A": "b # c"}


def test_env_file_double_quotes_are_stripped_and_expanded(tmp_path):
    p = env_file(tmp_path, 'A="hello world"\nB="x-${USER_PART}-y"\n')
    assert parse_env_file(p, {"USER_PART": "mid"}).values == {"A": "hello world", "B": "x-mid-y"}


def test_env_file_single_quotes_are_literal(tmp_path):
    p = env_file(tmp_path, "A='${NOT_SET_ANYWHERE} and $HOME'\n")
    assert parse_env_file(p, {}).values == {"A": "${NOT_SET_ANYWHERE} and $HOME"}


def test_env_file_mismatched_quotes_are_kept(tmp_path):
    assert parse_env_file(env_file(tmp_path, "A=\"abc'\n"), {}).values == {"A": "\"abc'"}


def test_env_file_expands_braced_references_only(tmp_path):
    p = env_file(tmp_path, "A=${X}/${Y}\nB=$X\n")
    assert parse_env_file(p, {"X": "one", "Y": "two"}).values == {"A": "one/two", "B": "$X"}


def test_env_file_expansion_reads_the_given_env_not_os_environ(tmp_path, monkeypatch):
    monkeypatch.setenv("ONLY_IN_OS", "os-value")
    with pytest.raises(EnvFileError):
        parse_env_file(env_file(tmp_path, "A=${ONLY_IN_OS}\n"), {})


def test_env_file_empty_variable_counts_as_set(tmp_path):
    assert parse_env_file(env_file(tmp_path, "A=pre${EMPTY}post\n"), {"EMPTY": ""}).values == {"A": "prepost"}


def test_env_file_unset_reference_names_file_line_and_variable_but_no_value(tmp_path):
    p = env_file(tmp_path, f"# header\nOK=1\nHF_TOKEN={CANARY}${{MISSING_VAR}}\n")
    with pytest.raises(EnvFileError) as exc:
        parse_env_file(p, {})
    message = str(exc.value)
    assert f"{p}:3" in message and "MISSING_VAR" in message
    assert CANARY not in message
    assert (exc.value.line, exc.value.name, exc.value.path) == (3, "MISSING_VAR", p)


def test_env_file_line_without_equals_is_skipped_with_warning_not_echoed(tmp_path):
    p = env_file(tmp_path, f"A=1\n{HF_FAKE}\n")  # a pasted fake token alone on a line
    parsed = parse_env_file(p, {})
    assert parsed.values == {"A": "1"}
    assert len(parsed.warnings) == 1
    assert "line 2" in parsed.warnings[0] and str(p) in parsed.warnings[0]
    assert HF_FAKE not in parsed.warnings[0]


def test_env_file_invalid_key_is_skipped_with_warning_not_echoed(tmp_path):
    p = env_file(tmp_path, f"export HF_TOKEN={CANARY}\n1BAD=x\nGOOD=y\n")
    parsed = parse_env_file(p, {})
    assert parsed.values == {"GOOD": "y"}
    assert len(parsed.warnings) == 2
    assert "line 1" in parsed.warnings[0] and "line 2" in parsed.warnings[1]
    assert all(CANARY not in w for w in parsed.warnings)
    assert "`export `" in parsed.warnings[0] and "HF_TOKEN=... without `export`" in parsed.warnings[0]
    assert "export" not in parsed.warnings[1]  # an invalid key is not named: it may be a pasted secret


def test_env_file_later_lines_override_and_split_at_first_equals(tmp_path):
    p = env_file(tmp_path, "A=first\nA=second=with=equals\n")
    assert parse_env_file(p, {}).values == {"A": "second=with=equals"}


def test_env_file_missing_file_is_an_error(tmp_path):
    with pytest.raises(EnvFileError, match="Env file not found"):
        parse_env_file(tmp_path / "nope.env", {})


def test_toml_env_files_resolve_like_the_cli(tmp_path):
    cfg = {"env_file": "old.env", "env_files": ["a.env", "/abs/b.env"]}
    assert toml_env_files(cfg, tmp_path / "cfg" / "rl.toml") == [
        tmp_path / "cfg" / "old.env", tmp_path / "cfg" / "a.env", Path("/abs/b.env")]
    assert toml_env_files({"env_files": "one.env"}, tmp_path / "rl.toml") == [tmp_path / "one.env"]


# ------------------------------------------------------------------ forwarding


def test_forwarding_reads_values_by_name_with_file_precedence(tmp_path):
    first = env_file(tmp_path, "WANDB_API_KEY=canary-from-file-1\nHF_TOKEN=canary-hf-file-1\n", "1.env")
    second = env_file(tmp_path, "WANDB_API_KEY=canary-from-file-2\nOTHER_SECRET=canary-ignored\n", "2.env")
    env = {"WANDB_API_KEY": "canary-from-env", "HF_TOKEN": "canary-hf-env"}
    assert resolve_forwarded(["WANDB_API_KEY"], env) == {"WANDB_API_KEY": "canary-from-env"}
    got = resolve_forwarded(["WANDB_API_KEY", "HF_TOKEN", "WANDB_API_KEY"], env, [first, second])
    assert got == {"WANDB_API_KEY": "canary-from-file-2", "HF_TOKEN": "canary-hf-file-1"}
    assert wire_secrets(got) == {"wandbApiKey": "canary-from-file-2", "hfToken": "canary-hf-file-1"}


def test_forwarding_passes_env_file_warnings_on(tmp_path):
    f = env_file(tmp_path, f"{HF_FAKE}\nHF_TOKEN=canary-h-123\n")  # fake token pasted alone on line 1
    warnings: list[str] = []
    assert resolve_forwarded(["HF_TOKEN"], {}, [f], on_warning=warnings.append) == {"HF_TOKEN": "canary-h-123"}
    assert len(warnings) == 1 and "line 1" in warnings[0] and HF_FAKE not in warnings[0]


def test_forwarding_only_takes_requested_names_from_files(tmp_path):
    f = env_file(tmp_path, "WANDB_API_KEY=canary-w-123\nHF_TOKEN=canary-h-123\n")
    assert resolve_forwarded(["HF_TOKEN"], {}, [f]) == {"HF_TOKEN": "canary-h-123"}
    assert resolve_forwarded([], {}, [f]) == {}


def test_forwarding_refuses_unsupported_name_and_names_both_allowed():
    with pytest.raises(ToolFailure) as exc:
        resolve_forwarded(["OPENAI_API_KEY"], {"OPENAI_API_KEY": CANARY})
    err = failure(exc)
    assert err.code == "unsupported_secret"
    assert "WANDB_API_KEY" in err.message and "HF_TOKEN" in err.message and "OPENAI_API_KEY" in err.message
    assert CANARY not in text_of(err)


def test_forwarding_refuses_the_launch_key_explicitly():
    with pytest.raises(ToolFailure) as exc:
        resolve_forwarded(["PRIME_API_KEY"], {"PRIME_API_KEY": CANARY})
    err = failure(exc)
    assert err.code == "unsupported_secret" and "never forwarded" in err.message
    assert CANARY not in text_of(err)


@pytest.mark.parametrize("env", [{}, {"HF_TOKEN": ""}])
def test_forwarding_refuses_unset_or_empty_names(env):
    with pytest.raises(ToolFailure) as exc:
        resolve_forwarded(["HF_TOKEN"], env)
    err = failure(exc)
    assert err.code == "secret_not_set" and "HF_TOKEN" in err.message
    assert "export it in the agent's environment or put it in an env file; never paste it" in err.fix


@pytest.mark.parametrize("arg", [f"HF_TOKEN={CANARY}", f"WANDB_API_KEY = {CANARY}", f"whatever={CANARY}"])
def test_forwarding_refuses_key_value_arguments_without_echoing_the_value(arg):
    with pytest.raises(ToolFailure) as exc:
        resolve_forwarded([arg], {})
    err = failure(exc)
    assert err.code == "secret_in_input"
    assert CANARY not in text_of(err)


@pytest.mark.parametrize("arg", [HF_FAKE, WANDB_FAKE, "AKIAFAKEFAKEFAKE0000", CANARY])  # all fake
def test_forwarding_refuses_a_value_passed_as_a_name_without_echoing_it(arg):
    with pytest.raises(ToolFailure) as exc:
        resolve_forwarded([arg], {"SOMETHING": CANARY})
    err = failure(exc)
    assert err.code == "secret_in_input"
    assert arg not in text_of(err)


def test_forwarding_reports_a_bad_env_file_as_a_tool_error(tmp_path):
    f = env_file(tmp_path, f"HF_TOKEN={CANARY}${{NOPE}}\n")
    with pytest.raises(ToolFailure) as exc:
        resolve_forwarded(["HF_TOKEN"], {}, [f])
    err = failure(exc)
    assert err.code == "env_file_invalid" and f"{f}:1" in err.message and CANARY not in text_of(err)


def test_forwardable_names_and_wire_keys():
    assert FORWARDABLE == {"WANDB_API_KEY": "wandbApiKey", "HF_TOKEN": "hfToken"}


# ------------------------------------------------------------------ detection

FORMATS = {
    "hugging face": "hf_FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE00",  # fake
    "openai": "sk-FAKEfakeFAKEfakeFAKEfakeFAKEfake00",  # fake
    "anthropic": "sk-ant-api03-FAKEfakeFAKEfakeFAKEfake",  # fake
    "github classic": "ghp_FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE0000",  # fake
    "github fine-grained": "github_pat_FAKEFAKEFAKEFAKEFAKE_FAKEFAKEFAKEFAKEFAKE",  # fake
    "aws": "AKIAFAKEFAKEFAKE0000",  # fake
    "slack": "xoxb-FAKE-fake-0000000000",  # fake
    "prime": "pit_FAKEfakeFAKEfake0000",  # fake
    "jwt": "eyJGQUtFIjoiZmFrZSJ9.eyJmYWtlIjoidHJ1ZSJ9.FAKEsignatureFAKE",  # fake
    "pem": "-----BEGIN RSA PRIVATE KEY-----\nFAKE\n-----END RSA PRIVATE KEY-----",  # fake
    "pem openssh": "-----BEGIN OPENSSH PRIVATE KEY-----\nFAKE",  # fake
}


@pytest.mark.parametrize("kind", sorted(FORMATS))
def test_detects_each_key_format_nested_without_returning_it(kind):
    value = FORMATS[kind]
    obj = {"args": {"note": "fine", "list": ["ok", {"deep": f"Bearer {value} trailing"}]}}
    locations = find_secret_values(obj, root="input", known_values=[])
    assert locations == ["input.args.list[1].deep"]
    assert all(value not in loc for loc in locations)


def test_detects_wandb_hex_key_only_in_wandb_fields():
    obj = {"wandb": {"project": "p", "api": WANDB_FAKE}, "source_ref": WANDB_FAKE, "WANDB_KEY": WANDB_FAKE}
    assert sorted(find_secret_values(obj, root="config")) == ["config.WANDB_KEY", "config.wandb.api"]


def test_plain_words_and_near_misses_are_not_flagged():
    obj = {"a": "task-abcdefghijklmnopqrstuvwxyz012345", "b": "sk-short", "c": "hf_tiny",  # fake near misses
           "model": {"name": "Qwen/Qwen3-4B"}, "ref": "0123456789abcdef0123456789abcdef01234567"}
    assert find_secret_values(obj, root="x") == []


def test_detects_known_values_equal_or_contained_with_locations():
    known = [CANARY, "canary-second-secret", "short"]
    obj = {
        "a": [1, 2, {"b": CANARY}],
        "c": {"d": f"https://user:{'canary-second-secret'}@example.org"},
        "e": "short",  # known but below the minimum length: not a hit
        "f": ["x", ["y", CANARY]],
    }
    locations = find_secret_values(obj, root="args", known_values=known)
    assert locations == ["args.a[2].b", "args.c.d", "args.f[1][1]"]
    assert not any(v in "".join(locations) for v in known)


def test_detects_secret_looking_keys_by_position_only():
    obj = {"fine": 1, HF_FAKE: "x", CANARY: "y"}
    hits = scan_for_secrets(obj, root="cfg", known_values=[CANARY])
    assert [h.location for h in hits] == ["cfg.<key #2>", "cfg.<key #3>"]
    assert all(HF_FAKE not in repr(h) and CANARY not in repr(h) for h in hits)


def test_toml_literals_under_secret_named_keys(tmp_path):
    toml_text = """
[wandb]
api_key = "literal-but-fake-value"
[orchestrator.client]
api_key_var = "OPENAI_API_KEY"
api_key = "EMPTY"
password = "${FROM_ENV}"
[model]
pad_token = "<|endoftext|>"
hf_token = "also-a-fake-literal"
[other]
token = ""
secret = "tiny"
"""
    cfg = tomllib.loads(toml_text)
    assert find_secret_values(cfg, root="rl.toml", check_key_names=True) == [
        "rl.toml.wandb.api_key", "rl.toml.model.hf_token"]
    assert find_secret_values(cfg, root="rl.toml") == []  # key names only matter when asked


def test_no_false_hits_on_the_bundled_prime_rl_examples():
    files = sorted(EXAMPLES.rglob("*.toml"))
    assert files
    for f in files:
        assert find_secret_values(tomllib.loads(f.read_text()), root=f.name, check_key_names=True) == [], f


def test_detection_walks_pydantic_models():
    class Inp(BaseModel):
        name: str
        tags: list[str]

    assert find_secret_values(Inp(name="x", tags=["a", HF_FAKE]), root="inp") == ["inp.tags[1]"]


def test_refuse_secret_values_lists_locations_not_values():
    refuse_secret_values({"ok": "fine"}, root="args")
    with pytest.raises(ToolFailure) as exc:
        refuse_secret_values({"config_path": "x.toml", "notes": [HF_FAKE]}, root="args")
    err = failure(exc)
    assert err.code == "secret_in_input"
    assert err.fields == [FieldProblem(path="args.notes[0]", problem="looks like Hugging Face token")]
    assert HF_FAKE not in text_of(err)


# ------------------------------------------------------------------ scrubbing


def test_scrub_text_replaces_values_and_ignores_short_ones():
    s = Scrubber([("HF_TOKEN", CANARY), ("SHORT", "abc")])
    assert s.scrub_text(f"token={CANARY}; again {CANARY}. abc") == \
        "token=[REDACTED:HF_TOKEN]; again [REDACTED:HF_TOKEN]. abc"
    assert len(s) == 1


def test_scrub_text_prefers_the_longest_value_at_a_position():
    s = Scrubber([("INNER", "canary-inner"), ("OUTER", "prefix-canary-inner-suffix")])
    assert s.scrub_text("a prefix-canary-inner-suffix b canary-inner") == \
        "a [REDACTED:OUTER] b [REDACTED:INNER]"


def test_scrub_text_leaves_no_fragment_of_overlapping_values():
    s = Scrubber([("A", "canary-AAAA1111"), ("B", "1111canary-BBBB")])
    out = s.scrub_text("x canary-AAAA1111canary-BBBB y")
    assert out == "x [REDACTED:A] y"
    assert "BBBB" not in out and "AAAA" not in out
    # a value overlapping itself
    s2 = Scrubber([("R", "abababab")])
    assert s2.scrub_text("ababababab!") == "[REDACTED:R]!"


def test_a_value_added_later_is_redacted_in_text_scrubbed_before_it_was_known():
    s = Scrubber()
    line = f"run failed: key {CANARY} rejected"
    assert s.scrub_text(line) == line  # unknown yet (and remembered as clean)
    s.add("HF_TOKEN", CANARY)
    assert s.scrub_text(line) == "run failed: key [REDACTED:HF_TOKEN] rejected"
    long_line = line + " x" * MEMO_CHARS  # past the memo's length: scrubbed every time
    assert "[REDACTED:HF_TOKEN]" in s.scrub_text(long_line) and CANARY not in s.scrub_text(long_line)


def test_clean_text_and_models_come_back_as_the_same_objects_however_often_they_are_scrubbed():
    class Item(BaseModel):
        model: str
        outcome: dict[str, str]

    s = Scrubber([("HF_TOKEN", CANARY)])
    items = [Item(model="PrimeIntellect/Qwen3-0.6B", outcome={"outcome": "done"}) for _ in range(3)]
    for _ in range(2):  # the second pass is answered from the memo
        assert all(s.scrub_obj(item) is item for item in items)
    dirty = Item(model=f"m-{CANARY}", outcome={"outcome": "done"})
    assert s.scrub_obj(dirty).model == "m-[REDACTED:HF_TOKEN]" and s.scrub_obj(dirty).model == "m-[REDACTED:HF_TOKEN]"


def test_the_memo_stays_bounded_and_still_redacts_after_it_is_emptied():
    s = Scrubber([("HF_TOKEN", CANARY)])
    for n in range(MEMO_ENTRIES + 10):
        s.scrub_text(f"trace-{n:06d}-of-a-long-run")
    assert len(s._memo) <= MEMO_ENTRIES
    assert s.scrub_text(f"again {CANARY}") == "again [REDACTED:HF_TOKEN]"


def test_scrub_obj_walks_keys_values_lists_and_tuples():
    s = Scrubber([("WANDB_API_KEY", CANARY)])
    obj = {"plain": 1, CANARY: [f"x{CANARY}", ("t", CANARY)], "n": {"deep": CANARY}}
    assert s.scrub_obj(obj) == {
        "plain": 1,
        "[REDACTED:WANDB_API_KEY]": ["x[REDACTED:WANDB_API_KEY]", ("t", "[REDACTED:WANDB_API_KEY]")],
        "n": {"deep": "[REDACTED:WANDB_API_KEY]"},
    }
    clean = {"a": ["b", {"c": 1}]}
    assert s.scrub_obj(clean) is clean


class Inner(BaseModel):
    note: str
    items: list[str] = []


class Outer(BaseModel):
    model_config = ConfigDict(extra="allow")
    title: str
    inner: Inner
    mapping: dict[str, str] = {}
    count: int = 0


def test_scrub_model_returns_same_type_with_scrubbed_content():
    s = Scrubber([("HF_TOKEN", CANARY)])
    m = Outer(title=f"t {CANARY}", inner=Inner(note=CANARY, items=["a", CANARY]), mapping={CANARY: "v"},
              count=3, extra_field=f"e{CANARY}")
    out = s.scrub_model(m)
    assert type(out) is Outer and type(out.inner) is Inner
    assert CANARY not in out.model_dump_json()
    assert out.title == "t [REDACTED:HF_TOKEN]" and out.inner.items == ["a", "[REDACTED:HF_TOKEN]"]
    assert out.mapping == {"[REDACTED:HF_TOKEN]": "v"} and out.count == 3
    assert out.model_extra == {"extra_field": "e[REDACTED:HF_TOKEN]"}
    assert CANARY in m.model_dump_json()  # the original is untouched
    clean = Outer(title="t", inner=Inner(note="n"))
    assert s.scrub_model(clean) is clean


def test_scrub_model_scrubs_extra_keys_and_tool_errors():
    s = Scrubber([("PRIME_API_KEY", CANARY)])
    out = s.scrub_model(Outer(title="t", inner=Inner(note="n"), **{CANARY: "x"}))
    assert CANARY not in out.model_dump_json() and out.model_extra == {"[REDACTED:PRIME_API_KEY]": "x"}
    err = ToolError(code="unauthorized", message=f"key {CANARY} rejected", fix="f",
                    fields=[FieldProblem(path="p", problem=CANARY)])
    scrubbed = s.scrub_model(err)
    assert isinstance(scrubbed, ToolError) and CANARY not in scrubbed.model_dump_json()


def test_scrubber_from_context_collects_env_and_config_key():
    env = {
        "PRIME_API_KEY": "canary-prime-env-key",
        "HF_TOKEN": "canary-hf-env-token",
        "MY_SERVICE_SECRET": "canary-service-secret",
        "DB_PASSWORD": "canary-db-password",
        "GOOGLE_CREDENTIALS": "canary-google-creds",
        "GITLAB_PAT": "canary-gitlab-pat-1",
        "PRIME_SSH_KEY_PATH": "/home/someone/.ssh/id_rsa",
        "HOME": "/home/someone/canary-not-secret",
    }
    settings = SimpleNamespace(api_key=SecretStr("canary-prime-config-key"))
    ctx = Context(env=env, _settings=settings)  # type: ignore[arg-type]
    s = Scrubber.from_context(ctx)
    text = " ".join(env.values()) + " canary-prime-config-key"
    out = s.scrub_text(text)
    for name in ("HF_TOKEN", "MY_SERVICE_SECRET", "DB_PASSWORD", "GOOGLE_CREDENTIALS", "GITLAB_PAT"):
        assert f"[REDACTED:{name}]" in out
    assert out.count("[REDACTED:PRIME_API_KEY]") == 2
    assert "/home/someone/.ssh/id_rsa" in out and "/home/someone/canary-not-secret" in out


def test_scrubber_from_context_reads_the_prime_config_file_key_too(tmp_path):
    (tmp_path / ".prime").mkdir()
    (tmp_path / ".prime" / "config.json").write_text('{"api_key": "canary-config-file-key"}')
    ctx = Context(env={"PRIME_API_KEY": "canary-env-launch-key"}, home=tmp_path)
    assert ctx.scrubber.scrub_text("canary-config-file-key canary-env-launch-key") == \
        "[REDACTED:PRIME_API_KEY] [REDACTED:PRIME_API_KEY]"
    assert Context(env={}, home=tmp_path).scrubber.scrub_text("canary-config-file-key") == \
        "[REDACTED:PRIME_API_KEY]"


def test_scrubber_from_context_survives_unresolvable_settings(tmp_path):
    class Broken(Context):
        @property
        def settings(self):  # type: ignore[override]
            raise RuntimeError("config file is malformed")

    s = Broken(env={"PRIME_API_KEY": "canary-prime-env-key"}, home=tmp_path).scrubber
    assert s.scrub_text("canary-prime-env-key") == "[REDACTED:PRIME_API_KEY]"


def test_scrubber_add_env_file_including_unexpandable_values(tmp_path):
    good = env_file(tmp_path, "WANDB_API_KEY='canary-wandb-file'\n", "good.env")
    bad = env_file(tmp_path, "HF_TOKEN=canary-hf-file-${UNSET_X}\n", "bad.env")
    s = Scrubber()
    s.add_env_file(good)
    s.add_env_file(bad)
    s.add_env_file(tmp_path / "missing.env")
    assert s.scrub_text("canary-wandb-file canary-hf-file-${UNSET_X}") == \
        "[REDACTED:WANDB_API_KEY] [REDACTED:HF_TOKEN]"
    assert sorted(s.known_values()) == ["canary-hf-file-${UNSET_X}", "canary-wandb-file"]


def test_scrubber_handles_8kb_output_with_50_secrets():
    secrets = [(f"SECRET_{i}", f"canary-{i:03d}-{'x' * (i % 7)}-value") for i in range(50)]
    s = Scrubber(secrets)
    chunks = [f"line {i}: {secrets[i % 50][1]} tail\n" for i in range(240)]
    text = "".join(chunks)
    assert len(text) > 8000
    out = s.scrub_text(text)
    assert "canary-" not in out
    assert out.count("[REDACTED:") == 240
