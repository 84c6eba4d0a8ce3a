"""Every registry tool against every fault of the emulator: prints the table and the totals.

    uv run python benchmarks/fault_matrix.py                   # every tool x every fault
    uv run python benchmarks/fault_matrix.py --tools mf_get_run mf_dispatch_run --faults 503 commit

Exit status 0 when every cell passed (no unhandled error, duplicate run, partial file or hang,
and every tool has a working set-up), 1 otherwise. See tests/_proof/matrix.py for what a
cell does and benchmarks/README.md for the figures.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from tests._proof.matrix import FAULTS, render, run_matrix


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", nargs="*", help="mf_ names (default: every registry tool)")
    parser.add_argument("--faults", nargs="*", choices=[f.name for f in FAULTS], help="columns (default: all)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    args = parser.parse_args(argv)
    faults = [f for f in FAULTS if not args.faults or f.name in args.faults]
    progress = None if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    with tempfile.TemporaryDirectory(prefix="fault-matrix-") as tmp:
        report = run_matrix(args.tools or None, faults, root=Path(tmp), progress=progress)
    print(render(report, faults))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
