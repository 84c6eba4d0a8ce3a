"""The skill text (SKILL.md + references/) against the Agent Skills spec and against the code.

What an agent reads must be true: every tool, argument, command, option, error code,
verdict and validation rule the text names is checked against the registry, the CLI and
the tool modules. `model-factory install-skill` is run as a user runs it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
import typing
from pathlib import Path

import pytest
from _helpers import SKILL_MD, mf, split_skill

from skill import install as installer
from skill import registry
from skill.cli import command_parser
from skill.exit_codes import EXIT_TOOL_ERROR
from tools import monitor
from tools.configs import MODEL_BEFORE, RULES
from tools.errors import ErrorCode

ROOT = Path(__file__).resolve().parent.parent
REFERENCES = sorted((ROOT / "references").glob("*.md"))
DOCS = [SKILL_MD, *REFERENCES]
SPEC_KEYS = {"name", "description", "license", "compatibility", "metadata", "allowed-tools"}
NAME_RULE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
TOOL_NAME = re.compile(r"\bmf_[a-z][a-z_]*[a-z]\b")
TOOL_CALL = re.compile(r"\b(mf_[a-z_]+)\(([^)]*)\)")
CODE_SPAN = re.compile(r"`([^`]+)`")


def section(path: Path, heading: str) -> str:
    """The text of ``## heading`` up to the next ``## ``."""
    text = path.read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match, f"{path.name} has no section {heading!r}"
    return match[1]


def first_column(table_text: str) -> list[str]:
    """Backticked names in the first column of a markdown table."""
    names = []
    for line in table_text.splitlines():
        if line.startswith("| `"):
            names += CODE_SPAN.findall(line.split("|")[1])
    return names


def cli_options(name: str) -> set[str] | None:
    """The option strings of `model-factory NAME` (any command: one parser for all), or None when
    there is no such command."""
    parser = command_parser(name)
    if parser is None:
        return None
    return {opt for action in parser._actions for opt in action.option_strings}


# -- the spec ---------------------------------------------------------------------------


def test_frontmatter_follows_the_agent_skills_spec():
    front, _ = split_skill()
    assert set(front) <= SPEC_KEYS, f"keys outside the spec: {set(front) - SPEC_KEYS}"
    name = front["name"]
    assert isinstance(name, str) and 1 <= len(name) <= 64 and NAME_RULE.match(name), name
    description = front["description"]
    assert isinstance(description, str) and 1 <= len(description) <= 1024, len(description)
    assert "Use when" in description, "the description must say when to use the skill"
    if "compatibility" in front:
        assert isinstance(front["compatibility"], str) and 1 <= len(front["compatibility"]) <= 500
    if "license" in front:
        assert isinstance(front["license"], str) and front["license"]
    if "metadata" in front:
        assert isinstance(front["metadata"], dict)
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in front["metadata"].items())


def test_body_is_under_500_lines():
    _, body = split_skill()
    assert len(body.splitlines()) < 500


def test_every_reference_over_300_lines_opens_with_its_contents():
    for ref in REFERENCES:
        text = ref.read_text(encoding="utf-8")
        if len(text.splitlines()) > 300:
            headings = re.findall(r"^## (.+)$", text, re.M)
            assert headings[0] == "Contents", f"{ref.name}: a table of contents first"
            listed = [line[2:] for line in section(ref, "Contents").splitlines() if line.startswith("- ")]
            assert listed == headings[1:], f"{ref.name}: its contents list every section, in order"


def test_skill_md_says_when_to_read_each_reference():
    table = section(SKILL_MD, "When to read a reference")
    linked = {t for t in LINK.findall(table)}
    assert {f"references/{r.name}" for r in REFERENCES} <= linked


def test_an_installed_copy_passes_the_agent_skills_reference_validator(tmp_path):
    """`agentskills validate` (PyPI skills-ref) on the folder install-skill writes."""
    installed = installer.install(tmp_path).path
    agentskills = Path(sys.executable).parent / "agentskills"
    done = subprocess.run([str(agentskills), "validate", str(installed)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Valid skill" in done.stdout


def test_the_skill_tells_agents_to_loop_on_short_waits_within_the_tools_bound():
    from tools.monitor.runs import DEFAULT_WAIT_SECONDS, MAX_WAIT_SECONDS

    text = section(SKILL_MD, "Workflow")
    assert MAX_WAIT_SECONDS < 60 and DEFAULT_WAIT_SECONDS == 45
    assert f"default {DEFAULT_WAIT_SECONDS}" in text and f"maximum {MAX_WAIT_SECONDS}" in text
    assert "Loop on `mf_wait_for_run(run_id)`" in text and "Never ask for a\n  longer wait" in text


def test_prime_commands_named_are_commands_of_prime_0_18():
    """The prime CLI commands the text sends a person to (reference/prime-api.md lists them)."""
    known = {"login", "config", "train", "volumes", "traces", "teams"}
    subcommands = {"train": {"validate", "run", "resume", "checkpoints", "logs", "get", "list"},
                   # prime 0.18.0 commands/volumes.py also has du, cat, sessions and stop (a session)
                   "volumes": {"get", "put", "create", "ls", "ssh", "list", "du", "cat", "sessions", "stop"},
                   "config": {"set-team-id", "remove-team-id", "set-api-key", "view"}, "traces": {"get", "list"}}
    seen = 0
    for doc in DOCS:
        for span in CODE_SPAN.findall(doc.read_text(encoding="utf-8")):
            words = span.split()
            if len(words) < 2 or words[0] != "prime" or words[1].startswith("-"):
                continue
            assert words[1] in known, f"{doc.name}: `{span}`"
            if words[1] in subcommands and len(words) > 2 and not words[2].startswith(("-", "<", "$")):
                assert words[2] in subcommands[words[1]], f"{doc.name}: `{span}`"
            seen += 1
    assert seen >= 10


def test_the_installer_reads_the_same_name_as_a_yaml_parser():
    front, _ = split_skill()
    assert installer.skill_name(SKILL_MD.read_text(encoding="utf-8")) == front["name"]


def anchors(path: Path) -> set[str]:
    """The anchors of a markdown file's headings, as GitHub makes them."""
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return {re.sub(r"[^a-z0-9 _-]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.+)$", text, re.M)}


def test_every_relative_link_resolves_and_every_reference_is_linked_from_skill_md():
    for doc in DOCS:
        for target in LINK.findall(doc.read_text(encoding="utf-8")):
            if re.match(r"^[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            path = (doc.parent / file).resolve() if file else doc
            assert path.is_file(), f"{doc.name}: broken link {target}"
            assert not anchor or anchor in anchors(path), f"{doc.name}: {target} names no heading of {path.name}"
    linked = {(ROOT / t).resolve() for t in LINK.findall(SKILL_MD.read_text(encoding="utf-8"))}
    assert REFERENCES and all(ref.resolve() in linked for ref in REFERENCES)


# -- true to the tools ------------------------------------------------------------------


def test_every_tool_named_exists_and_every_tool_is_in_skill_md():
    known = {spec.name for spec in registry.TOOLS}
    for doc in DOCS:
        unknown = set(TOOL_NAME.findall(doc.read_text(encoding="utf-8"))) - known
        assert not unknown, f"{doc.name} names tools that do not exist: {unknown}"
    missing = known - set(TOOL_NAME.findall(SKILL_MD.read_text(encoding="utf-8")))
    assert not missing, f"SKILL.md does not mention: {missing}"


def test_arguments_shown_in_calls_and_in_the_tool_map_exist():
    checked = 0
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for tool, args in TOOL_CALL.findall(text):
            fields = registry.input_schema(tool)["properties"]
            flat = re.sub(r"\[[^\]]*\]|\"[^\"]*\"", "X", args)  # lists and strings hold no names
            for part in (p.strip() for p in flat.split(",")):
                if part in ("", "..."):
                    continue
                name = re.match(r"([a-z_]+)\s*(?:\?|=|$)", part)
                assert name and name[1] in fields, f"{doc.name}: {tool}({part}) is not an argument"
                checked += 1
    for line in section(SKILL_MD, "Tool map").splitlines():
        cells = line.split("|")
        if len(cells) > 3 and cells[1].strip().startswith("`mf_"):
            tool = cells[1].strip().strip("`")
            fields = registry.input_schema(tool)["properties"]
            for arg in CODE_SPAN.findall(cells[2]):
                assert arg in fields, f"Tool map: {tool} has no argument {arg}"
                checked += 1
    assert checked > 50


def test_every_command_and_option_named_exists_in_the_cli():
    seen = 0
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for name in re.findall(r"\bmodel-factory[ \t]+([a-z][a-z-]*)", text):
            assert cli_options(name) is not None, f"{doc.name}: `model-factory {name}` is not a command"
            seen += 1
        for span in (s for s in CODE_SPAN.findall(text) if "model-factory " in s):
            words = shlex.split(span)
            if "model-factory" not in words or words.index("model-factory") + 1 >= len(words):
                continue
            name = words[words.index("model-factory") + 1]
            options = cli_options(name)
            if options is None:  # a placeholder such as <command>
                continue
            for flag in (w.split("=")[0] for w in words if w.startswith("--")):
                assert flag in options, f"{doc.name}: {name} has no option {flag}"
    assert seen >= 5


def test_skill_md_names_the_positional_fields_of_every_command_in_their_order():
    text = " ".join(SKILL_MD.read_text(encoding="utf-8").split())
    said = re.search(r"((?:`\w+`(?:, | and ))+`\w+`) are positional, in that order", text)
    assert said, "SKILL.md says which fields are positional"
    named = CODE_SPAN.findall(said[1])
    assert set(named) == {field for spec in registry.TOOLS for field in spec.positional}
    for spec in registry.TOOLS:
        assert list(spec.positional) == sorted(spec.positional, key=named.index), spec.command
        for field in set(named) & set(spec.input_model.model_fields) - set(spec.positional):  # named as the option
            assert f"{spec.command}' `--{field.replace('_', '-')}`" in text, f"{spec.command} takes --{field}"


def test_skill_md_says_how_to_go_step_by_step_on_a_local_emulator():
    text = " ".join(SKILL_MD.read_text(encoding="utf-8").split())
    assert "step by step, a person approving: `model-factory emulator`" in text
    assert cli_options("emulator") is not None and "export what it prints" in text


def test_skill_md_says_the_emulator_clock_runs_at_real_time_and_how_to_speed_it_up():
    from skill.emulator import seed
    from skill.emulator.simulator import Timing

    text = " ".join(SKILL_MD.read_text(encoding="utf-8").split())
    timing, steps = Timing(), 20  # the smoke run: basic/reverse-text/rl's max_steps
    seconds = timing.queue_seconds + timing.startup_seconds + steps * timing.step_seconds + timing.finalize_seconds
    assert seed.DEFAULT_SPEED == 1.0 and f"real time (a smoke run: ~{round(seconds / 60)} minutes)" in text
    assert "--speed" in cli_options("emulator") and "with `--speed 60`, seconds" in text and seconds / 60 < 60


def test_skill_md_names_the_fine_tuned_model_the_smoke_example_starts_from_and_the_checkout_command():
    text = " ".join(SKILL_MD.read_text(encoding="utf-8").split())
    example = ROOT / "tools" / "configs" / "examples" / "basic" / "reverse-text" / "rl.toml"
    model = tomllib.loads(example.read_text(encoding="utf-8"))["model"]["name"]
    assert f"already fine-tuned `{model}`: tell the person" in text
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    assert "model-factory" in scripts and "`uv run model-factory` (or `.venv/bin/model-factory`)" in text


def test_every_error_code_has_advice_and_every_code_named_is_produced():
    produced = set(typing.get_args(ErrorCode))
    table = first_column(section(ROOT / "references" / "troubleshooting.md", "Error codes"))
    assert sorted(table) == sorted(produced), "troubleshooting.md's Error codes table lists every code, once"
    first = section(SKILL_MD, "Errors").split("you will meet first are")[1].split(".\n")[0]
    codes = CODE_SPAN.findall(first)
    assert codes and set(codes) <= produced, f"SKILL.md names codes no tool produces: {set(codes) - produced}"


def test_the_verdict_table_covers_exactly_the_verdicts_of_check_progress():
    table = first_column(section(ROOT / "references" / "troubleshooting.md", "Per verdict: what to look at next"))
    assert sorted(table) == sorted(typing.get_args(monitor.Verdict))


def test_the_rule_table_matches_the_validation_rules():
    rows = {}
    for line in section(ROOT / "references" / "configs.md", "What `mf_validate_config` checks (rule ids)").splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 4 and cells[1].startswith("`"):
            rows[cells[1].strip("`")] = (cells[2], cells[3])
    assert rows == {r.id: (r.severity, "/".join(r.modes)) for r in RULES if r.scope != "validator"}


RULE_NAMED = re.compile(r"\b(rules?|warnings?|errors?)\s+\(?`([^`]+)`")
VALIDATOR_NAMED = re.compile(r"`((?:prime_rl\.configs\.)?[A-Za-z]+Config\.\w+|validate_\w+|auto_setup_\w+)`")
RULE_FAMILIES = ("schema:", "pydantic:", "backend:", "prime:")


def test_every_rule_id_the_skill_text_names_is_a_rule_the_validator_reports():
    """`rule `x``, `a warning (`x`)`, the rejects table's rule ids and prime-rl validator names are rule ids
    of tools/configs (an `error (`x`)` may also be an error code)."""
    known = {r.id for r in RULES} | set(MODEL_BEFORE)
    codes = set(typing.get_args(ErrorCode))
    rejects = section(ROOT / "references" / "configs.md", "What the hosted platform rejects")
    named = [(ROOT / "references" / "configs.md", "rule", span) for line in rejects.splitlines()
             if line.startswith("| ") and len(line.split("|")) > 3 for span in CODE_SPAN.findall(line.split("|")[2])]
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        named += [(doc, word, name) for word, name in RULE_NAMED.findall(text)]
        named += [(doc, "validator", name) for name in VALIDATOR_NAMED.findall(text)]
    for doc, word, name in named:
        if name.startswith(RULE_FAMILIES) or (word.startswith("error") and name in codes):
            continue
        assert name in known or any(k.endswith("." + name) for k in known), \
            f"{doc.name} names {word} {name!r}, which no validation rule reports"
    assert len(named) > 15


def test_bundled_example_ids_in_configs_md_are_the_bundled_examples():
    from tools.configs import example_paths

    ids = [c for c in first_column(section(ROOT / "references" / "configs.md", "The bundled examples"))]
    assert sorted(ids) == sorted(example_paths())


# -- install-skill ----------------------------------------------------------------------


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return mf(*args)


def tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_install_skill_copies_the_pack_with_our_marker_and_upgrades_only_our_copy(tmp_path):
    front, _ = split_skill()
    dest = tmp_path / "skills"
    source = {"SKILL.md": SKILL_MD.read_bytes(),
              **{f"references/{p.name}": p.read_bytes() for p in REFERENCES}}

    first = run_cli("install-skill", "--dest", str(dest))
    assert first.returncode == 0, first.stderr
    target = dest / front["name"]
    assert tree(target) == {**source, installer.MARKER: (target / installer.MARKER).read_bytes()}
    assert json.loads((target / installer.MARKER).read_text())["installed_by"] == "model-factory-skill"
    assert str(target) in first.stdout and "mcp-config --agent claude-code" in first.stderr
    assert [p.name for p in dest.iterdir()] == [front["name"]], "no staging folder may be left behind"

    again = run_cli("install-skill", "--dest", str(dest))
    assert again.returncode == 0 and "up to date" in again.stdout

    edited = target / "references" / REFERENCES[0].name
    edited.write_text("a local edit\n")
    refused = run_cli("install-skill", "--dest", str(dest))
    assert refused.returncode == EXIT_TOOL_ERROR and "--force" in refused.stderr
    assert edited.read_text() == "a local edit\n", "a refused install must not touch the existing copy"
    assert "Traceback" not in refused.stderr

    forced = run_cli("install-skill", "--dest", str(dest), "--force")
    assert forced.returncode == 0, forced.stderr
    assert {k: v for k, v in tree(target).items() if k != installer.MARKER} == source
    assert [p.name for p in dest.iterdir()] == [front["name"]]


def test_an_older_copy_of_ours_is_upgraded_without_force(tmp_path):
    result = installer.install(tmp_path)
    marker = json.loads((result.path / installer.MARKER).read_text())
    old = b"---\nname: model-factory\ndescription: an older text\n---\nold\n"
    (result.path / "SKILL.md").write_bytes(old)
    marker["files"]["SKILL.md"] = hashlib.sha256(old).hexdigest()  # as an older version would have recorded it
    (result.path / installer.MARKER).write_text(json.dumps(marker))
    upgraded = installer.install(tmp_path)
    assert upgraded.status == "replaced" and (upgraded.path / "SKILL.md").read_bytes() == SKILL_MD.read_bytes()


def test_the_installed_copy_records_the_absolute_path_of_the_checkout_it_came_from(tmp_path, monkeypatch):
    checkout = SKILL_MD.parent.resolve()
    from_checkout = installer.install(tmp_path / "a")
    assert json.loads((from_checkout.path / installer.MARKER).read_text())["source_checkout"] == str(checkout)
    # a wheel's copy (skill/pack in site-packages) names the clone the package was installed from (direct_url.json)
    package = tmp_path / "site-packages" / "skill"
    shutil.copytree(checkout / "references", package / "pack" / "references")
    shutil.copy(SKILL_MD, package / "pack" / "SKILL.md")
    monkeypatch.setattr(installer, "_PACKAGE_DIR", package)
    from_wheel = installer.install(tmp_path / "b")
    assert json.loads((from_wheel.path / installer.MARKER).read_text())["source_checkout"] == str(checkout)
    # a copy whose marker lacks it (an older install) is rewritten, not called up to date
    marker = json.loads((from_wheel.path / installer.MARKER).read_text())
    del marker["source_checkout"]
    (from_wheel.path / installer.MARKER).write_text(json.dumps(marker))
    assert installer.install(tmp_path / "b").status == "replaced"
    assert "source_checkout" in json.loads((from_wheel.path / installer.MARKER).read_text())


def test_a_folder_we_did_not_install_is_never_replaced_even_with_force(tmp_path):
    name = split_skill()[0]["name"]
    theirs = tmp_path / "a" / name
    theirs.mkdir(parents=True)
    (theirs / "SKILL.md").write_text("someone else's skill")
    for force in (False, True):
        with pytest.raises(installer.InstallError, match="did not install"):
            installer.install(tmp_path / "a", force=force)
    assert (theirs / "SKILL.md").read_text() == "someone else's skill"

    blocker = tmp_path / "b" / name
    blocker.parent.mkdir()
    blocker.write_text("not a skill")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("keep me")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / name).symlink_to(elsewhere, target_is_directory=True)
    for folder in ("b", "c"):
        with pytest.raises(installer.InstallError, match="file or symlink"):
            installer.install(tmp_path / folder, force=True)
    assert blocker.read_text() == "not a skill" and (elsewhere / "keep.txt").read_text() == "keep me"
    assert (tmp_path / "c" / name).is_symlink()


@pytest.mark.parametrize(("agent", "user", "project"), [
    ("claude-code", ".claude/skills", ".claude/skills"),
    ("codex", ".agents/skills", ".agents/skills"),
    ("cursor", ".cursor/skills", ".cursor/skills"),
    ("opencode", ".config/opencode/skills", ".opencode/skills"),
])
def test_install_skill_goes_to_each_agents_folder_per_user_or_per_project(agent, user, project, tmp_path):
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(home)}
    name = split_skill()[0]["name"]
    for extra, where in (([], home / user), (["--project"], work / project)):
        done = mf("install-skill", "--agent", agent, *extra, env=env, cwd=work)
        assert done.returncode == 0, done.stderr
        assert (where / name / "SKILL.md").read_bytes() == SKILL_MD.read_bytes()


# -- mcp-config ---------------------------------------------------------------------------


def mcp_config(agent: str) -> str:
    done = run_cli("mcp-config", "--agent", agent)
    assert done.returncode == 0, done.stderr
    return done.stdout


def starts_this_installation(command: list[str]) -> None:
    assert Path(command[0]).is_absolute() and command[-1] == "mcp"
    version = subprocess.run([*command[:-1], "--version"], capture_output=True, text=True, timeout=60)
    assert version.returncode == 0 and version.stdout.startswith("model-factory-skill ")


def test_mcp_config_prints_each_agents_entry_in_its_own_format_with_an_absolute_command():
    claude = shlex.split(mcp_config("claude-code"))
    assert claude[:6] == ["claude", "mcp", "add", "--scope", "user", "model-factory"] and claude[6] == "--"
    starts_this_installation(claude[7:])
    for agent in ("cursor", "claude-desktop"):
        entry = json.loads(mcp_config(agent))["mcpServers"]["model-factory"]
        starts_this_installation([entry["command"], *entry["args"]])
    desktop = json.loads(mcp_config("claude-desktop"))["mcpServers"]["model-factory"]
    assert "env" not in desktop  # the per-user state store needs no folder named
    codex = tomllib.loads(mcp_config("codex"))["mcp_servers"]["model-factory"]
    starts_this_installation([codex["command"], *codex["args"]])


def test_the_wheel_layout_is_preferred_and_the_folder_follows_the_frontmatter_name(tmp_path, monkeypatch):
    package = tmp_path / "site-packages" / "skill"
    pack = package / "pack"
    (pack / "references").mkdir(parents=True)
    text = SKILL_MD.read_text(encoding="utf-8").replace("name: model-factory\n", "name: renamed-skill\n", 1)
    (pack / "SKILL.md").write_text(text, encoding="utf-8")
    (pack / "references" / "only.md").write_text("# only\n")
    monkeypatch.setattr(installer, "_PACKAGE_DIR", package)

    assert installer.pack_dir() == pack
    result = installer.install(tmp_path / "dest")
    assert result.path == (tmp_path / "dest" / "renamed-skill").resolve()
    assert sorted(tree(result.path)) == [installer.MARKER, "SKILL.md", "references/only.md"]


def test_the_skill_and_the_package_carry_one_version():
    from importlib.metadata import version

    front, _ = split_skill()
    assert front["metadata"]["version"] == version("model-factory-skill")
