"""The bundled prime-rl examples (``tools/configs/examples``, verbatim from prime-rl 559b447; see
its PROVENANCE.md): where they are, their ids, their one-line descriptions.
"""

from __future__ import annotations

import re
from pathlib import Path

from tools.configs._toml import SMOKE_EXAMPLE
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


def resolve_config(text: str, ctx: Context) -> tuple[Path, str]:
    """What a config argument names (``example`` of mf_prepare_config, ``config_path`` of
    mf_validate_config and mf_plan_run; the one place that decides): ``(path, label)``. An existing
    path wins (relative to the working folder; a folder or FIFO too, so reading it says what is wrong);
    else a bundled example id (``basic/reverse-text/rl``, also written ``examples/...`` or with
    ``.toml``), labelled with its id; else ToolFailure ``config_not_found`` naming both and
    mf_list_examples. ``bad_arguments`` for a path that cannot be a path (NUL, unknown ``~user``)."""
    path = ctx.resolve_path(text)
    if path.exists():
        return path, str(path)
    ident = text.strip().removeprefix("examples/").removesuffix(".toml")
    bundled = example_paths()
    if ident in bundled:
        return bundled[ident], ident
    listing = call("mf_list_examples")
    raise fail("config_not_found", f"No config file at {path}, and {text!r} is not a bundled example id.",
               f"Check the path, or pass a bundled example id such as {SMOKE_EXAMPLE}: {listing} lists them, "
               "mf_prepare_config copies one to edit.", next_calls=[listing])
