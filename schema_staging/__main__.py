"""``python -m schema_staging``: regenerate the shipped snapshot, or check a config.

    python -m schema_staging export --python PYTHON --commit SHA [--check]
    python -m schema_staging export --checkout PRIME_RL_DIR [--check]
    python -m schema_staging check CONFIG.toml [--schema auto|real|snapshot] [--python PYTHON] [--sft] [--json]

``export`` runs the export in an interpreter that has ``prime_rl.configs`` (a venv's python,
or ``uv run --no-sync python`` in a prime-rl checkout, whose git HEAD is the commit) and
writes ``schema_staging/snapshot/``; with ``--check`` it writes nothing and exits 1 when the
shipped files differ from the fresh export. ``check`` prints a verdict (exit 1 when invalid).
For the fixture of this repository::

    bash ../shared/fixtures/prime-rl-schema/build-venv.sh /tmp/prl --with-tasksets
    uv run python -m schema_staging export --python /tmp/prl/bin/python \\
        --commit 559b44772e471d1538537b8805cc77f3824a5e64
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tomllib
from pathlib import Path

from schema_staging import _export, check
from schema_staging._real import Interpreter


def _export_command(args: argparse.Namespace) -> int:
    if args.checkout:
        interpreter = Interpreter.checkout(Path(args.checkout).resolve())
        commit = args.commit or interpreter.commit
        command, cwd = list(interpreter.command), interpreter.cwd
    else:
        commit, command, cwd = args.commit, [args.python, "-I", "-B"], None
    if not commit or not re.fullmatch(r"[0-9a-f]{40}", commit):
        print("export: give the prime-rl commit the interpreter's prime-rl-configs comes from: --commit SHA "
              "(40 hex)", file=sys.stderr)
        return 2
    try:
        files = _export.finalize(_export.export_raw(command, cwd=cwd), commit=commit)
    except _export.ExportError as exc:
        print(f"export: {exc}", file=sys.stderr)
        return 1
    dest = Path(args.out) if args.out else _export.SNAPSHOT_DIR
    if args.check:
        stale = [name for name, data in sorted(files.items()) if not (dest / name).is_file()
                 or (dest / name).read_bytes() != data]
        print(f"snapshot {'differs from the export: ' + ', '.join(stale) if stale else 'is up to date'} ({dest})")
        return 1 if stale else 0
    for path in _export.write_snapshot(files, dest):
        print(f"wrote {path}")
    return 0


def _check_command(args: argparse.Namespace) -> int:
    path = Path(args.config)
    try:
        raw = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        print(f"check: cannot read {path}: {exc}", file=sys.stderr)
        return 2
    verdict = check(raw, mode="sft" if args.sft else None, schema=args.schema, python=args.python)
    if args.json:
        print(json.dumps(verdict.to_dict(), indent=1, default=str))
    else:
        errors = len(verdict.errors)
        print(f"{'valid' if verdict.valid else f'{errors} error(s)'} in {path} ({verdict.mode}, {verdict.backend} "
              f"schema at {verdict.schema_commit[:12]}{', fell back from real' if verdict.fallback_from else ''})")
        for f in verdict.findings:
            print(f"  {f.severity}: {f.path or '<file>'}: {f.message} [{f.rule}]")
    return 0 if verdict.valid else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m schema_staging", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    export = sub.add_parser("export", help="regenerate the shipped JSON Schemas")
    where = export.add_mutually_exclusive_group(required=True)
    where.add_argument("--python", help="an interpreter that has prime_rl.configs")
    where.add_argument("--checkout", help="a prime-rl checkout (run with uv run --no-sync python)")
    export.add_argument("--commit", help="prime-rl commit of that interpreter's schema (a checkout: its HEAD)")
    export.add_argument("--out", help="folder to write (default: the package's snapshot/)")
    export.add_argument("--check", action="store_true", help="compare with the shipped files, write nothing")
    checking = sub.add_parser("check", help="validate one TOML config")
    checking.add_argument("config")
    checking.add_argument("--schema", choices=("auto", "real", "snapshot"), default="auto")
    checking.add_argument("--python", help="interpreter for the real back-end")
    checking.add_argument("--sft", action="store_true", help="validate as SFT (like prime train --sft)")
    checking.add_argument("--json", action="store_true", help="print the verdict as JSON")
    args = parser.parse_args(argv)
    return _export_command(args) if args.command == "export" else _check_command(args)


if __name__ == "__main__":
    raise SystemExit(main())
