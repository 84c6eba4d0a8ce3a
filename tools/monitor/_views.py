"""Pieces of the run views that several monitor tools show: server texts clipped, the platform's
failure analysis.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from tools.monitor._logtext import excerpt
from tools.platform import wire


class FailureAnalysisView(BaseModel):
    """The platform's ``failureAnalysis`` of a FAILED run."""

    root_cause: str | None = Field(default=None, description=(
        "The platform's diagnosis, e.g. 'CUDA OOM in trainer at step 37'."))
    evidence: list[str] = Field(default_factory=list, description="Log lines or facts behind the diagnosis.")
    confidence: float | None = Field(default=None, description="Confidence of the diagnosis, 0..1.")


#: Server texts (errors, evidence) are cut to this many characters, evidence to 8 items.
MAX_TEXT_CHARS = 600
MAX_EVIDENCE = 8


def clip(text: str | None, limit: int = MAX_TEXT_CHARS) -> str | None:
    """``text`` cut to ``limit`` characters, start and end kept (:func:`~._logtext.excerpt`)."""
    return excerpt(text, limit) if text else text


def failure_analysis_view(fa: wire.FailureAnalysis | None) -> FailureAnalysisView | None:
    """The platform's ``failureAnalysis`` with its texts clipped and at most 8 evidence items."""
    if fa is None:
        return None
    return FailureAnalysisView(root_cause=clip(fa.root_cause),
                               evidence=[clip(e) or "" for e in fa.evidence[:MAX_EVIDENCE]], confidence=fa.confidence)
