"""Regenerate the JSON Schema snapshot of prime-rl's RLConfig/SFTConfig shipped in tools/configs/schema_snapshot/.

    uv run python scripts/export_schema_snapshot.py --python PYTHON --commit SHA [--check] [--out DIR]
    uv run python scripts/export_schema_snapshot.py --checkout PRIME_RL_DIR [--check] [--out DIR]

The export runs in an interpreter that has ``prime_rl.configs`` (a venv's python, or
``uv run --no-sync python`` in a prime-rl checkout, whose git HEAD is the commit) and writes
the three files of the snapshot; with ``--check`` it writes nothing and exits 1 when the shipped
files differ from the fresh export. Use the platform's schema commit, in an environment that has
the tasksets whose environment keys the snapshot should know (the fixture's ``--with-tasksets``)::

    bash ../shared/fixtures/prime-rl-schema/build-venv.sh /tmp/prl --with-tasksets
    uv run python scripts/export_schema_snapshot.py --python /tmp/prl/bin/python \\
        --commit 559b44772e471d1538537b8805cc77f3824a5e64

tests/test_schema_snapshot.py checks that the shipped files equal a fresh export from the fixture.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools.configs import (  # noqa: E402 - after the path set-up, for running from a checkout
    SCHEMA_SNAPSHOT_DIR,
    Interpreter,
    export_schema_raw,
    finalize_schema_export,
)


class ExportFailed(Exception):
    """The export could not run (message for the person)."""


def export(args: argparse.Namespace) -> dict[str, bytes]:
    """The snapshot's files from the interpreter the arguments name."""
    if args.checkout:
        interpreter = Interpreter.checkout(Path(args.checkout).resolve())
        commit = args.commit or interpreter.commit
        command, cwd = list(interpreter.command), interpreter.cwd
    else:
        commit, command, cwd = args.commit, [args.python, "-I", "-B"], None
    if not commit or not re.fullmatch(r"[0-9a-f]{40}", commit):
        raise ExportFailed("give the prime-rl commit the interpreter's prime-rl-configs comes from: --commit SHA "
                           "(40 hex)")
    try:
        return finalize_schema_export(export_schema_raw(command, cwd=cwd), commit=commit)
    except RuntimeError as exc:
        raise ExportFailed(str(exc)) from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/export_schema_snapshot.py", description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--python", help="an interpreter that has prime_rl.configs")
    where.add_argument("--checkout", help="a prime-rl checkout (run with uv run --no-sync python)")
    parser.add_argument("--commit", help="prime-rl commit of that interpreter's schema (a checkout: its HEAD)")
    parser.add_argument("--out", help=f"folder to write (default: {SCHEMA_SNAPSHOT_DIR})")
    parser.add_argument("--check", action="store_true", help="compare with the shipped files, write nothing")
    args = parser.parse_args(argv)
    try:
        files = export(args)
    except ExportFailed as exc:
        print(f"export: {exc}", file=sys.stderr)
        return 1
    dest = Path(args.out) if args.out else SCHEMA_SNAPSHOT_DIR
    stale = [name for name, data in sorted(files.items())
             if not (dest / name).is_file() or (dest / name).read_bytes() != data]
    if args.check:
        print(f"snapshot {'differs from the export: ' + ', '.join(stale) if stale else 'is up to date'} ({dest})")
        return 1 if stale else 0
    dest.mkdir(parents=True, exist_ok=True)
    from tools.platform.files import write_atomic

    for name, data in sorted(files.items()):
        write_atomic(dest / name, [data])
        print(f"wrote {dest / name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
