"""The code's shape, checked as CI checks it: ruff's rules (pyproject ``[tool.ruff]``) hold on the
whole tree, and every error code is named once (``tools.errors.ErrorCode``), used as named, and
documented."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import typing
from pathlib import Path

from skill import registry
from tools.errors import ErrorCode
from tools.platform import errors as perr

ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
CODES = set(typing.get_args(ErrorCode))


def source_files() -> list[Path]:
    """Our Python sources outside the emulator (the other side of the wire has no ToolError)."""
    return [p for p in sorted([*(ROOT / "tools").rglob("*.py"), *(ROOT / "skill").rglob("*.py")])
            if "emulator" not in p.relative_to(ROOT).parts]


def test_the_tree_passes_ruff():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--quiet", str(ROOT)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_architecture_doc_lists_every_error_code_and_no_other():
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = re.search(r"^## Error codes\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert section, "docs/ARCHITECTURE.md has no '## Error codes' section"
    listed = re.findall(r"^\| `([a-z_]+)` \|", section[1], re.M)
    assert len(listed) == len(set(listed)), "a code is listed twice"
    assert set(listed) == CODES, {"undocumented": CODES - set(listed), "unknown": set(listed) - CODES}


def test_every_code_written_in_the_source_is_an_error_code():
    """A literal code in fail("...") or ToolError(code="...") that is not in ErrorCode would be a
    validation error at the moment it is raised; this finds it on paths no test reaches."""
    used: dict[str, str] = {}
    for path in source_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", getattr(node.func, "attr", None))
            values = [node.args[0]] if name == "fail" and node.args else []
            values += [k.value for k in node.keywords if name == "ToolError" and k.arg == "code"]
            for value in values:
                if isinstance(value, ast.Constant):
                    used[value.value] = f"{path.relative_to(ROOT)}:{node.lineno}"
    assert len(used) > 25
    assert {code: where for code, where in used.items() if code not in CODES} == {}


def test_every_platform_error_class_has_a_code_of_its_own():
    classes = [perr.PlatformError, *perr.PlatformError.__subclasses__()]
    codes = [cls.code for cls in classes]
    assert len(codes) == len(set(codes)) and set(codes) == set(typing.get_args(perr.PlatformCode)) <= CODES


def test_agents_see_the_error_codes_as_an_enum_in_every_output_schema():
    for spec in registry.TOOLS:
        schema = registry.output_schema(spec.name)
        tool_error = schema["$defs"]["ToolError"]["properties"]["code"]
        assert set(tool_error["enum"]) == CODES, spec.name
