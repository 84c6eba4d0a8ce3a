"""Secrets in shapes no key format names: the secret half of an AWS key pair (40 characters, no
prefix), a value after a secret-named variable in a log, an ``hf_`` token split by a newline or
encoded in ``env_vars``, an env file's inline comment and ``export`` line, and a launch key that
is blank or ends in a newline. Real HTTP against the emulator, real files, the registry as every
surface calls it; every secret here is fake and says so (FAKE in it).
"""

from __future__ import annotations

import base64
import shutil

import pytest
from _helpers import EXAMPLE, call, emulator_env, err, make_ctx, ok

from skill import cli, registry
from skill.emulator.faults import route_path
from tools.core import Context
from tools.guardrails.secret_detection import credential_tokens, parse_env_file
from tools.preflight import PreflightInput, preflight

#: The secret half of an AWS key pair, fake: 40 characters of base64, no prefix.
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYFAKEKEY0aZ"
#: Another, without "/" (most have none), fake.
AWS_SECRET_NO_SLASH = "k9XqFAKE2mPzR7vLtY4nWbFAKE8cHs3JdUe0oGi1"
#: Its key id, fake (AKIA + 16): redacted by its format already.
AWS_KEY_ID = "AKIAFAKEFAKEFAKE0000"
HF_FAKE = "hf_" + "FAKEfake0" * 4  # fake Hugging Face token
WANDB_FAKE = "wandb_v1_" + "FAKEfake0" * 9  # fake W&B key


def test_the_credential_shape_catches_random_keys_and_lets_names_ids_and_paths_pass():
    assert credential_tokens(AWS_SECRET) == [AWS_SECRET]
    assert credential_tokens(f"run-{AWS_SECRET.replace('/', 'x')}") != []
    for text in ("reverse-text-mf620ad9cd", "cszvo48n7w6by7vh95fniim33", "ThisIsMyVeryLongExperimentRunName2024",
                 "PrimeIntellect/Qwen3-0.6B-Reverse-Text-SFT", "/home/JohnSmith/Projects/ModelFactory2024/configs",
                 "0123456789abcdef0123456789abcdef01234567", "Qwen3VL8BInstructAWQ4bitGPTQ", "H100_80GB",
                 "SWEBenchVerifiedGLM45AirRL", "MathGRPOQwen7BLoRAr16a32", "DeepSeekR1DistillQwen32BMathGRPO"):
        assert credential_tokens(text) == [], text


# -- 5. the secret half of an AWS key pair -----------------------------------------------------------


def test_a_run_name_shaped_like_a_credential_is_refused_before_anything_is_recorded(frozen_ctx, emulator):
    refused = err(registry.call_tool("mf_plan_run", {"config_path": str(EXAMPLE), "team": "personal",
                                                     "name": AWS_SECRET}, frozen_ctx), "secret_in_input")
    assert AWS_SECRET not in refused.model_dump_json() and "looks like a credential" in refused.message
    assert refused.fields[0].path == "name"
    assert frozen_ctx.store().plans() == [] and not emulator.state.runs
    named = ok(registry.call_tool("mf_plan_run", {"config_path": str(EXAMPLE), "team": "personal",
                                                  "name": "reverse-text-v2"}, frozen_ctx))
    assert named.run_name.startswith("reverse-text-v2-mf")  # words and our own fingerprint pass


def test_a_config_whose_run_name_or_file_name_is_shaped_like_a_credential_is_refused(frozen_ctx, tmp_path):
    named = tmp_path / "named.toml"
    named.write_text(f'name = "{AWS_SECRET}"\n' + EXAMPLE.read_text())
    report = ok(call(frozen_ctx, "mf_validate_config", config_path=str(named)))
    assert not report.valid and [e.path for e in report.errors] == ["name"]
    assert AWS_SECRET not in report.model_dump_json()
    planned = err(call(frozen_ctx, "mf_plan_run", config_path=str(named), team="personal"), "invalid_config")
    assert AWS_SECRET not in planned.model_dump_json()
    stem = tmp_path / f"{AWS_SECRET_NO_SLASH}.toml"  # a file name cannot hold the "/"
    shutil.copy(EXAMPLE, stem)
    by_file = err(call(frozen_ctx, "mf_plan_run", config_path=str(stem), team="personal"), "secret_in_input")
    assert "config file's name" in by_file.message and AWS_SECRET_NO_SLASH not in by_file.model_dump_json()


@pytest.mark.parametrize(("tool", "arguments"), [
    ("mf_get_run", {"run_id": AWS_SECRET}),
    ("mf_check_progress", {"run_id": AWS_SECRET}),
    ("mf_validate_config", {"config_path": AWS_SECRET}),
    ("mf_prepare_config", {"example": AWS_SECRET, "dest": "out.toml"}),
    ("mf_plan_run", {"config_path": str(EXAMPLE), "gpu_type": AWS_SECRET}),  # owner_ambiguous quotes the call
    ("mf_plan_run", {"config_path": str(EXAMPLE), "gpu_type": AWS_SECRET, "team": "personal"}),
])
def test_no_error_quotes_an_argument_shaped_like_a_credential(frozen_ctx, tool, arguments):
    answer = call(frozen_ctx, tool, **arguments)
    assert answer.error and AWS_SECRET not in answer.model_dump_json(), answer
    assert "[REDACTED:credential-shaped argument]" in answer.model_dump_json() or answer.code == "bad_arguments"


def test_the_terminal_never_shows_an_argument_shaped_like_a_credential(frozen_ctx, emulator, capsys, monkeypatch):
    for key, value in frozen_ctx.env.items():
        monkeypatch.setenv(key, value)
    for argv in (["get-run", AWS_SECRET], ["plan-run", str(EXAMPLE), "--gpu-type", AWS_SECRET],
                 ["validate-config", AWS_SECRET], ["plan-run", str(EXAMPLE), "--name", AWS_SECRET]):
        with pytest.raises(SystemExit) as exited:
            cli.main(argv)
        out = capsys.readouterr()
        assert exited.value.code != 0 and out.err
        assert AWS_SECRET not in out.out + out.err, argv


@pytest.mark.parametrize("line", [
    f"export AWS_ACCESS_KEY_ID={AWS_KEY_ID} AWS_SECRET_ACCESS_KEY={AWS_SECRET}",
    f'{{"aws_secret_access_key": "{AWS_SECRET}", "region": "us-east-1"}}',
    f"connecting with password: {AWS_SECRET[:16]} to the bucket",
    f"GET https://storage.example/bucket?token={AWS_SECRET[:20]}&part=1",
])
def test_a_value_after_a_secret_named_variable_in_a_log_is_redacted(frozen_ctx, emulator, launch, line):
    run_id = launch(after=400)
    emulator.faults.patch("GET", route_path("/api/v1/rft/runs/{run_id}/logs"),
                          patch={"logs": f"2026-12-01T10:00:00Z INFO boot\n2026-12-01T10:00:01Z INFO {line}\n"})
    logs = ok(call(frozen_ctx, "mf_get_logs", run_id=run_id, component="trainer"))
    text = logs.model_dump_json()
    assert AWS_SECRET[:16] not in text and "[REDACTED:" in text and "INFO boot" in text
    assert AWS_KEY_ID not in text


def test_ordinary_assignments_in_a_log_are_left_alone(frozen_ctx, emulator, launch):
    run_id = launch(after=400)
    plain = "max_tokens=12345678 tokenizer=Qwen/Qwen3-0.6B api_key=EMPTY HF_TOKEN=${HF_TOKEN} sort_key=1"
    emulator.faults.patch("GET", route_path("/api/v1/rft/runs/{run_id}/logs"),
                          patch={"logs": f"2026-12-01T10:00:01Z INFO {plain}\n"})
    logs = ok(call(frozen_ctx, "mf_get_logs", run_id=run_id, component="trainer"))
    assert plain in logs.model_dump_json() and "REDACTED" not in logs.model_dump_json()


# -- 6. a token split by a newline or encoded, under a neutral name --------------------------------


@pytest.mark.parametrize(("table", "value"), [
    ("trainer.env_vars", f'"""{HF_FAKE[:12]}\n{HF_FAKE[12:]}"""'),
    ("trainer.env_vars", f"'''{HF_FAKE[:12]}\r\n  {HF_FAKE[12:]}'''"),
    ("trainer.env_vars", f'"{base64.b64encode(HF_FAKE.encode()).decode()}"'),
    ("trainer.env_vars", f'"{base64.urlsafe_b64encode(WANDB_FAKE.encode()).decode()}"'),
    ("orchestrator.env_vars", f'"{HF_FAKE.encode().hex()}"'),
    ("inference.env_vars", f'"{base64.b64encode(HF_FAKE.encode()).decode()}"'),
])
def test_an_env_vars_value_hiding_a_token_is_refused_at_its_key(frozen_ctx, emulator, tmp_path, table, value):
    config = tmp_path / "hidden.toml"
    config.write_text(EXAMPLE.read_text() + f"\n[{table}]\nMY_SETTING = {value}\n")
    report = ok(call(frozen_ctx, "mf_validate_config", config_path=str(config)))
    assert [e.path for e in report.errors] == [f"{table}.MY_SETTING"] and not report.valid
    assert HF_FAKE[12:] not in report.model_dump_json() and "value not shown" in report.errors[0].message
    planned = call(frozen_ctx, "mf_plan_run", config_path=str(config), team="personal")
    assert planned.error and planned.code in ("secret_in_input", "invalid_config")
    assert f"{table}.MY_SETTING" in planned.model_dump_json() and not emulator.state.runs


def test_an_encoded_ordinary_value_is_not_a_secret(frozen_ctx, tmp_path):
    config = tmp_path / "plain.toml"
    text = base64.b64encode(b"just some ordinary configuration text").decode()
    config.write_text(EXAMPLE.read_text() + f'\n[trainer.env_vars]\nMY_SETTING = "{text}"\nSHA = "{"ab" * 20}"\n')
    assert ok(call(frozen_ctx, "mf_validate_config", config_path=str(config))).valid


# -- 7. env files: prime's convention, and what each line became ---------------------------------


def test_an_inline_comment_after_a_forwarded_key_is_refused_not_forwarded(frozen_ctx, emulator, tmp_path):
    env = tmp_path / "run.env"
    env.write_text(f"WANDB_API_KEY={WANDB_FAKE} # my note\nHF_TOKEN=\"{HF_FAKE} # inside the quotes\"\n")
    parsed = parse_env_file(env, {})
    assert parsed.values["WANDB_API_KEY"] == f"{WANDB_FAKE} # my note"  # as prime's parser keeps it
    assert parsed.commented == {"WANDB_API_KEY"} and "Line 1" in parsed.warnings[0]
    refused = err(call(frozen_ctx, "mf_plan_run", config_path=str(EXAMPLE), team="personal", env_files=[str(env)]),
                  "env_file_invalid")
    assert f"line 1 of {env}" in refused.message and "`#`" in refused.message
    assert WANDB_FAKE not in refused.model_dump_json() and not emulator.state.runs


def test_an_export_line_says_why_it_is_skipped(frozen_ctx, tmp_path):
    env = tmp_path / "run.env"
    env.write_text(f"export HF_TOKEN={HF_FAKE}\n")
    refused = err(call(frozen_ctx, "mf_plan_run", config_path=str(EXAMPLE), team="personal", env_files=[str(env)],
                       secrets=["HF_TOKEN"]), "secret_not_set")
    assert "starts with `export `" in refused.message and "HF_TOKEN=... without `export`" in refused.message
    assert HF_FAKE not in refused.model_dump_json()


def test_a_forwarded_value_from_the_environment_with_a_newline_is_refused(emulator, tmp_path):
    ctx = make_ctx(emulator, tmp_path, env={"HF_TOKEN": HF_FAKE + "\n"})
    refused = err(call(ctx, "mf_plan_run", config_path=str(EXAMPLE), team="personal", secrets=["HF_TOKEN"]),
                  "secret_not_set")
    assert "whitespace or control characters" in refused.message and HF_FAKE not in refused.model_dump_json()
    ctx.close()


# -- 8. a launch key that is blank or ends in a newline --------------------------------------------


@pytest.mark.parametrize("key", ["   ", "{key}\n", "{key} ", "fake-key-with\tcontrol", "fake-kéy-0000"])
def test_a_malformed_launch_key_is_named_as_such_and_nothing_is_sent(emulator, tmp_path, key):
    env = emulator_env(emulator, PRIME_API_KEY=key.format(key=emulator.api_key), PATH="/nonexistent")
    ctx = Context(env=env, home=tmp_path / "home", state_dir=tmp_path / "state")
    report = preflight(PreflightInput(), ctx)
    checks = {c.name: c for c in report.checks}
    assert checks["api_key"].code == "api_key_malformed" and not report.ok
    assert "blank" in checks["api_key"].detail or "whitespace or control characters" in checks["api_key"].detail
    assert checks["api_reachable"].ok is None and "cannot be sent" in checks["api_reachable"].detail
    before = len(emulator.faults.seen)
    refused = err(call(ctx, "mf_list_runs", team="personal"), "credentials_missing")
    assert "No usable API key" in refused.message and len(emulator.faults.seen) == before
    ctx.close()
