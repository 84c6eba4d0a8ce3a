"""The bundled prime-rl examples (``tools/configs/examples``, verbatim from prime-rl 559b447; see
its PROVENANCE.md): where they are, their ids, their one-line descriptions.
"""

from __future__ import annotations

import re
from pathlib import Path

from tools.core import Context
from tools.errors import call, fail

#: The bundled prime-rl examples (verbatim, see examples/PROVENANCE.md).
EXAMPLES_DIR = Path(__file__).resolve().parent / "examples"


def example_paths() -> dict[str, Path]:
    return {p.relative_to(EXAMPLES_DIR).with_suffix("").as_posix(): p for p in sorted(EXAMPLES_DIR.rglob("*.toml"))}


def example_descriptions() -> dict[str, str]:
    """``id -> notes`` from the table of examples/PROVENANCE.md."""
    try:
        text = (EXAMPLES_DIR / "PROVENANCE.md").read_text(encoding="utf-8")
    except OSError:
        return {}
    rows = re.findall(r"^\|\s*`examples/([^`]+)\.toml`\s*\|\s*([^|]*)\|\s*([^|]*)\|", text, re.M)
    return {ident: f"{kind.strip()}: {notes.strip()}" for ident, kind, notes in rows}


def resolve_example(example: str, ctx: Context) -> tuple[Path, str]:
    ident = example.strip().removeprefix("examples/").removesuffix(".toml")
    bundled = example_paths()
    if ident in bundled:
        return bundled[ident], ident
    path = ctx.resolve_path(example)
    if path.exists():  # reading it says what is wrong when it is not a config file
        return path, str(path)
    listing = call("mf_list_examples")
    raise fail("config_not_found", f"No bundled example {example!r} and no TOML file at {path}.",
               f"Pass one of the ids {listing} lists (e.g. basic/reverse-text/rl), or an existing path.",
               next_calls=[listing])

