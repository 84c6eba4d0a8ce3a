"""Env files are parsed as ``prime`` 0.18.0 parses them: the same file through both parsers.

Our :func:`tools.guardrails.secret_detection.parse_env_file` and ``prime_cli.utils.env_vars.parse_env_file``
(from the real CLI's own virtual environment, built once by ``tests/test_prime_cli_interop.py``'s
``prime_exe`` fixture) read one file holding every rule (comments, blank lines, whitespace,
double quotes, single quotes kept literal, mismatched quotes, ``#`` inside a value, ``${VAR}``
expansion and bare ``$VAR``, an empty variable, a line without ``=``, an invalid key, ``export``,
a repeated key, several ``=``) and must give the same values; an unset ``${VAR}`` must fail in
both with the same message. The per-rule unit tests are in tests/test_guardrails_secrets.py.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from test_prime_cli_interop import prime_exe  # noqa: F401 - the fixture building prime 0.18.0's venv

from tools.guardrails.secret_detection import EnvFileError, parse_env_file

pytestmark = pytest.mark.interop

ENV = {"FAKE_HOME_DIR": "/home/fake-user", "FAKE_EMPTY": ""}
EVERY_RULE = """# a comment line
   # an indented comment

  SPACED  =  spaced value with fake words  \t
DQ="double ${FAKE_HOME_DIR} quoted"
SQ='single ${FAKE_HOME_DIR} literal'
MISMATCHED="mismatched'
HASH=fake-value # not a comment
BARE=$FAKE_HOME_DIR and ${FAKE_HOME_DIR}
EMPTYREF=${FAKE_EMPTY}x
no_equals_line
1BAD=skipped
export EXPORTED=skipped-as-an-invalid-key
DUP=first
DUP=second
EQ=a=b=c
EMPTY=
ONEQUOTE='
_under_score1="ok"
"""

CLI_PARSE = """
import json, sys
from pathlib import Path
from prime_cli.utils.env_vars import EnvParseError, parse_env_file
try:
    print(json.dumps({"values": parse_env_file(Path(sys.argv[1]))}))
except EnvParseError as exc:
    print(json.dumps({"error": str(exc)}))
"""


def cli_parse(prime: Path, path: Path) -> dict:
    python = prime.parent / "python"
    done = subprocess.run([str(python), "-c", CLI_PARSE, str(path)], capture_output=True, text=True, timeout=60,
                          env={"PATH": os.environ.get("PATH", ""), **ENV})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_every_rule_gives_the_values_prime_gives(prime_exe, tmp_path):  # noqa: F811
    path = tmp_path / "every-rule.env"
    path.write_text(EVERY_RULE)
    ours = parse_env_file(path, ENV)
    assert cli_parse(prime_exe, path) == {"values": ours.values}
    assert ours.values["SQ"] == "single ${FAKE_HOME_DIR} literal"
    assert ours.values["DQ"] == "double /home/fake-user quoted"
    assert len(ours.warnings) == 4  # no '=', invalid key, export: skipped with a warning, as the CLI does
    assert "the value of HASH goes on after a space with `#`" in ours.warnings[0]  # kept, as the CLI keeps it
    assert ours.values["HASH"] == "fake-value # not a comment"


def test_an_unset_reference_fails_in_both_with_the_same_message(prime_exe, tmp_path):  # noqa: F811
    path = tmp_path / "unset.env"
    path.write_text("OK=1\nHF_TOKEN=${FAKE_NOT_SET_ANYWHERE}\n")
    with pytest.raises(EnvFileError) as ours:
        parse_env_file(path, ENV)
    assert cli_parse(prime_exe, path) == {"error": str(ours.value)}
