"""The code's shape, checked as CI checks it: the import contracts of pyproject
``[tool.importlinter]`` hold (and break on the violations they exist for, shown on a copy of the
tree), ruff's rules hold on the whole tree, mypy (pyproject ``[tool.mypy]``) finds nothing, and
every error code is named once (``tools.errors.ErrorCode``), used as named, and documented."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import typing
from pathlib import Path

import pytest

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


LINT_IMPORTS = str(Path(sys.executable).parent / "lint-imports")


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    """``lint-imports`` on the packages under ``root`` with the contracts of ``root/pyproject.toml``."""
    return subprocess.run([LINT_IMPORTS, "--no-cache"], cwd=root, env={"PYTHONPATH": str(root), "PATH": ""},
                          capture_output=True, text=True, timeout=120)


def test_the_import_contracts_hold():
    done = lint_imports(ROOT)
    assert done.returncode == 0 and " 0 broken." in done.stdout, done.stdout + done.stderr


#: (file to change, line added to it, the contract that must then break).
VIOLATIONS = {
    "a deferred cycle inside a phase": (
        "tools/monitor/_views.py", "def later():\n    from tools.monitor import runs  # noqa", "No import cycles"),
    "a cycle between two skill modules": (
        "skill/exit_codes.py", "def later():\n    from skill import cli  # noqa", "skill layers"),
    "the emulator importing tools": (
        "skill/emulator/state.py", "def later():\n    from tools.errors import ToolError  # noqa",
        "The emulator"),
    "the emulator importing the registry": (
        "skill/emulator/faults.py", "def later():\n    from skill import registry  # noqa", "skill layers"),
    "a guardrail using the Context at run time": (
        "tools/guardrails/store.py", "def later():\n    from tools.core import Context  # noqa", "tools layers"),
    "the platform client using the tool error shape": (
        "tools/platform/client.py", "def later():\n    from tools.errors import fail  # noqa", "tools layers"),
    "a tool importing a surface": (
        "tools/monitor/runs.py", "def later():\n    from skill import render  # noqa", "skill reaches the tools"),
    "one phase reaching into another's private module": (
        "tools/traces/listing.py", "from tools.monitor import _views  # noqa", "A private module"),
    "a phase module the layers do not list": ("tools/newphase.py", "", "tools layers"),
}


def copy_of_the_tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    for package in ("tools", "skill"):
        shutil.copytree(ROOT / package, root / package, ignore=shutil.ignore_patterns("__pycache__", "examples"))
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    return root


@pytest.mark.parametrize("case", VIOLATIONS, ids=str)
def test_the_import_contracts_break_on_a_violation(case, tmp_path):
    path, line, contract = VIOLATIONS[case]
    root = copy_of_the_tree(tmp_path)
    target = root / path
    target.write_text((target.read_text() if target.exists() else "") + f"\n\n{line}\n")
    done = lint_imports(root)
    assert done.returncode != 0, done.stdout
    broken = [line for line in done.stdout.splitlines() if line.endswith(" BROKEN")]
    assert any(b.startswith(contract) for b in broken), done.stdout


def test_imports_under_type_checking_do_not_count(tmp_path):
    root = copy_of_the_tree(tmp_path)
    target = root / "tools/platform/client.py"
    target.write_text(target.read_text() + "\n\nfrom typing import TYPE_CHECKING  # noqa\n\n"
                      "if TYPE_CHECKING:\n    from tools.core import Context  # noqa\n")
    done = lint_imports(root)
    assert done.returncode == 0, done.stdout


def test_the_tree_passes_ruff():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--quiet", str(ROOT)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_type_checker_is_clean():
    """``uv run mypy`` as .ci/run runs it: tools/ and skill/ with pydantic's plugin."""
    assert "uv run mypy" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("Success: no issues found"), done.stdout


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


def documented_layout() -> set[str]:
    """The paths named in the layout block of docs/ARCHITECTURE.md (two spaces of indent a level)."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    block = re.search(r"^## Layout\n.*?^```\n(.*?)^```", text, re.S | re.M)
    assert block, "docs/ARCHITECTURE.md has no code block in '## Layout'"
    paths: set[str] = set()
    parents: list[str] = []
    for line in block[1].splitlines():
        indent = len(line) - len(line.lstrip(" "))
        name = line.split()[0] if line.strip() else ""
        if not name or "," in name or indent >= 16:  # a continuation of the description column
            continue
        depth = indent // 2
        parents = parents[:depth] + [name.rstrip("/")]
        paths.add("/".join(parents) + ("/" if name.endswith("/") else ""))
    return paths


def test_the_architecture_doc_gives_every_folder_and_module_of_tools_and_skill_a_line():
    documented = documented_layout()
    actual = {f"{p.relative_to(ROOT).as_posix()}/" for package in ("tools", "skill")
              for p in [ROOT / package, *(ROOT / package).rglob("*")] if p.is_dir() and p.name != "__pycache__"
              and "examples" not in p.relative_to(ROOT).parts[:-1]}
    actual |= {p.relative_to(ROOT).as_posix() for package in ("tools", "skill") for p in (ROOT / package).rglob("*.py")
               if p.name != "__init__.py" or p.parent.name == "emulator" or p.parent.name == "tools"}
    assert actual - documented == set(), "add a line for each of these to docs/ARCHITECTURE.md '## Layout'"
    assert {p for p in documented if p.startswith(("tools/", "skill/"))} - actual == set(), "stale lines"


@pytest.mark.parametrize("package", ["tools.core", "tools.configs", "tools.launch", "tools.monitor", "tools.traces",
                                     "tools.platform"])
def test_each_package_surface_is_a_sorted_all_of_names_it_has(package):
    """What other packages import is listed in the package's __all__, once, sorted (as httpx guards
    its surface); a private module's name never is."""
    import importlib

    module = importlib.import_module(package)
    names = module.__all__
    assert names == sorted(names) and len(names) == len(set(names))
    assert [name for name in names if not hasattr(module, name) or name.startswith("_")] == []


def test_tests_import_public_names_only():
    private = re.compile(r"^\s*(from|import) tools\.[\w.]*\._\w+|^\s*from tools\.[\w.]+ import _\w+", re.M)
    offenders = [p.name for p in (ROOT / "tests").rglob("*.py") if p.name != "test_architecture.py"
                 and private.search(p.read_text(encoding="utf-8"))]
    assert offenders == []


def test_every_skip_for_something_missing_goes_through_the_helper_ci_turns_into_a_failure():
    """A test that cannot run skips with ``_helpers.unavailable(reason, "MF_REQUIRE_X")``, never ``pytest.skip``
    or a ``skipif`` on a missing program (only the operating system may be a ``skipif``); and ``.ci/run`` sets
    every ``MF_REQUIRE_`` variable the tests name, so nothing CI can install is skipped there."""
    direct = re.compile(r"pytest\.skip\(|importorskip\(|skipif\((?!os\.name)")
    offenders = [f"{p.name}:{n}" for p in sorted((ROOT / "tests").rglob("*.py")) if p.name not in (
        "_helpers.py", "test_architecture.py") for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if direct.search(line)]
    assert offenders == []
    named = {m for p in (ROOT / "tests").rglob("*.py") for m in re.findall(r"MF_REQUIRE_[A-Z]+", p.read_text())}
    ci = set(re.findall(r"^export (MF_REQUIRE_[A-Z]+)=1", (ROOT / ".ci" / "run").read_text(), re.M))
    assert named and named - {"MF_REQUIRE_X"} <= ci, sorted(named - ci)
