"""Time and peak memory of mf_validate_config on each malformed-TOML document of the corpus
(tests/data/malformed-toml/), beside a valid example: every one must be refused at a line and
column, quickly and in little memory, the deepest nesting included.

    uv run python benchmarks/toml_corpus.py
"""

from __future__ import annotations

import re
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from skill import registry
from tools.configs import EXAMPLES_DIR
from tools.core import Context
from tools.errors import ToolError

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "malformed-toml"
LOCATED = re.compile(r"at line \d+, column \d+")


def measure(ctx: Context, path: Path) -> tuple[float, int, str]:
    """(milliseconds, peak bytes, outcome) of one validation."""
    tracemalloc.start()
    started = time.perf_counter()
    result = registry.call_tool("mf_validate_config", {"config_path": str(path), "schema": "snapshot"}, ctx)
    seconds = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    if isinstance(result, ToolError):
        outcome = result.code + (" at line/column" if LOCATED.search(result.message) else " WITHOUT a line/column")
    else:
        outcome = "validated"
    return seconds * 1000, peak, outcome


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        ctx = Context(env={"HOME": tmp}, home=Path(tmp), state_dir=Path(tmp) / "state", cwd=Path(tmp))
        measure(ctx, EXAMPLES_DIR / "basic" / "reverse-text" / "rl.toml")  # imports, caches
        rows = [(p.name, p.stat().st_size, *measure(ctx, p)) for p in sorted(CORPUS.glob("*.toml"))]
        example = EXAMPLES_DIR / "basic" / "reverse-text" / "rl.toml"
        reference = ("valid example basic/reverse-text/rl.toml", example.stat().st_size, *measure(ctx, example))
    print(f"{'document':50s} {'bytes':>7s} {'ms':>7s} {'peak KB':>8s}  outcome")
    for name, size, ms, peak, outcome in [reference, *sorted(rows, key=lambda r: -r[2])]:
        print(f"{name:50s} {size:7d} {ms:7.1f} {peak / 1024:8.0f}  {outcome}")
    located = sum(1 for r in rows if r[4] == "invalid_toml at line/column")
    slowest, largest = max(r[2] for r in rows), max(r[3] for r in rows) / 1024
    print(f"\n{len(rows)} documents: {located} invalid_toml at a line and column; slowest {slowest:.1f} ms, "
          f"largest peak {largest:.0f} KB (valid example: {reference[2]:.1f} ms, {reference[3] / 1024:.0f} KB)")
    return 0 if located == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
