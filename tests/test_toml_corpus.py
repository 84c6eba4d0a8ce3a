"""The malformed-TOML corpus (tests/data/malformed-toml/): every document, through the registry
and the ``model-factory`` CLI, gives ``invalid_toml`` with a line and a column, within bounded
memory (a hang is caught by the test timeout, not timed). Alongside, what is refused before
parsing (a folder, a FIFO, a device, a file over the size limit, a binary file), each with its
own clear error, and valid TOML nested too deep, located too.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tomllib
import tracemalloc
from pathlib import Path

import pytest
from _helpers import mf_json

from skill import registry
from skill.cli import main
from tools.configs import MAX_CONFIG_BYTES
from tools.core import Context
from tools.errors import ToolError

CORPUS = Path(__file__).parent / "data" / "malformed-toml"
DOCUMENTS = sorted(CORPUS.glob("*.toml"))
LOCATED = re.compile(r"at line (\d+), column (\d+)")
#: Peak memory of one validation of a corpus document (the largest is 20 kB).
MEMORY_BOUND_BYTES = 32 * 1024 * 1024


def located(error: ToolError, name: str) -> tuple[int, int]:
    """The (line, column) an invalid_toml error names, the same in its message and its field."""
    assert error.code == "invalid_toml", f"{name}: {error.code}: {error.message}"
    where = LOCATED.search(error.message)
    assert where, f"{name}: no line and column in {error.message!r}"
    line, column = int(where[1]), int(where[2])
    assert [f.path.rsplit(":", 2)[1:] for f in error.fields] == [[str(line), str(column)]]
    return line, column


@pytest.fixture
def ctx(tmp_path: Path) -> Context:
    return Context(env={"HOME": str(tmp_path / "home")}, home=tmp_path / "home", state_dir=tmp_path / "state",
                   cwd=tmp_path)


def test_the_corpus_holds_at_least_50_documents_that_no_toml_parser_accepts():
    assert len(DOCUMENTS) >= 50
    for path in DOCUMENTS:
        with pytest.raises((tomllib.TOMLDecodeError, UnicodeDecodeError, RecursionError)):
            tomllib.loads(path.read_bytes().decode("utf-8-sig"))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("document", DOCUMENTS, ids=[p.stem for p in DOCUMENTS])
def test_each_malformed_document_is_invalid_toml_at_a_line_and_column(ctx, document, tmp_path):
    copy = tmp_path / document.name
    shutil.copyfile(document, copy)
    tracemalloc.start()
    try:
        result = registry.call_tool("mf_validate_config", {"config_path": str(copy)}, ctx)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert isinstance(result, ToolError), f"{document.name} validated"
    line, column = located(result, document.name)
    lines = copy.read_bytes().split(b"\n")
    assert 1 <= line <= len(lines) and 1 <= column <= len(lines[line - 1]) + 1
    assert peak < MEMORY_BOUND_BYTES, f"{document.name}: {peak:,} bytes"
    json.loads(result.model_dump_json())


@pytest.mark.timeout(60)
@pytest.mark.parametrize("document", DOCUMENTS, ids=[p.stem for p in DOCUMENTS])
def test_the_cli_reports_each_malformed_document_with_its_line_and_column(document, capsys):
    for args in (["--json"], []):
        with pytest.raises(SystemExit) as ended:
            main(["validate-config", str(document), *args])
        out, err = capsys.readouterr()
        assert ended.value.code == 3
        if args:
            where = located(ToolError.model_validate(json.loads(out)), document.name)
        else:
            human = LOCATED.search(out + err)
            assert human and (int(human[1]), int(human[2])) == where, (out, err)


@pytest.mark.parametrize("name", ["key-duplicate", "nesting-arrays-unclosed-5000", "utf8-invalid-byte",
                                  "string-multiline-basic-unterminated"])
def test_the_installed_cli_reports_the_line_and_column_in_its_own_process(mf_env, name):
    code, error = mf_json("validate-config", CORPUS / f"{name}.toml", env=mf_env)
    assert code == 3, error
    located(ToolError.model_validate(error), name)


# -- refused before parsing, each with its own error ---------------------------------------------------


def refused(tmp_path: Path) -> dict[str, tuple[str, str, str]]:
    """kind -> (path, code, what the message says)."""
    folder = tmp_path / "folder.toml"
    folder.mkdir()
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    large = tmp_path / "large.toml"
    with large.open("wb") as handle:
        handle.truncate(MAX_CONFIG_BYTES + 1)
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"max_steps = 20\n\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    return {"folder": (str(folder), "bad_arguments", "is a folder"),
            "fifo": (str(fifo), "bad_arguments", "not a regular file"),
            "device": ("/dev/zero", "bad_arguments", "not a regular file"),
            "too large": (str(large), "bad_arguments", f"larger than {MAX_CONFIG_BYTES:,} bytes"),
            "binary": (str(binary), "invalid_toml", "a binary file")}


def test_what_is_refused_before_parsing_says_why_each_in_its_own_words(ctx, tmp_path, capsys):
    seen = set()
    cases = refused(tmp_path)
    for kind, (path, code, says) in cases.items():
        result = registry.call_tool("mf_validate_config", {"config_path": path}, ctx)
        assert isinstance(result, ToolError) and result.code == code and says in result.message, (kind, result)
        with pytest.raises(SystemExit) as ended:
            main(["validate-config", path, "--json"])
        cli = json.loads(capsys.readouterr().out)
        assert ended.value.code == (2 if code == "bad_arguments" else 3) and (cli["code"], cli["message"]) == (
            code, result.message)
        seen.add(says)
    assert len(seen) == 4  # fifo and device share "not a regular file"; the rest each have their own
    binary = registry.call_tool("mf_validate_config", {"config_path": cases["binary"][0]}, ctx)
    assert located(binary, "binary") == (4, 1)  # the first NUL byte


@pytest.mark.parametrize("text", [
    "x = " + "[" * 100 + "]" * 100 + "\n",
    "x = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n",
    ".".join(["k"] * 70) + " = 1\n",
    "[" + ".".join(["t"] * 70) + "]\nx = 1\n",
], ids=["arrays-100", "inline-tables-3000", "dotted-key-70-parts", "table-header-70-parts"])
def test_valid_toml_nested_too_deep_is_refused_at_a_line_and_column(ctx, tmp_path, text):
    path = tmp_path / "deep.toml"
    path.write_text(text)
    result = registry.call_tool("mf_validate_config", {"config_path": str(path)}, ctx)
    assert isinstance(result, ToolError) and "nested more than 64 levels" in result.message
    line, column = located(result, "deep")
    assert line == text[:text.index("\n")].count("\n") + 1 and column > 60
