"""Findings and verdicts shared by every back-end, and the key path of a pydantic error location.

A :class:`Finding` names a place in the user's file as a *key path*: the TOML keys (and list
indexes) from the top of the file, with pydantic's union branch labels taken out. pydantic
reports ``trainer.optim.adamw.lr`` for ``[trainer.optim] type = "adamw"`` and
``trainer.model.ep.int`` for one branch of ``int | Literal["auto"]``; the file has neither
``adamw`` nor ``int`` as a key, so :func:`key_path` walks the config alongside the location
and drops segments that are not keys there. The conformance benchmark compares first-error
key paths, so the real back-end, the snapshot and the reference all go through this function.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from tools.configs._facts import Mode

#: What decided a verdict: prime-rl's own classes (``real``, also when ``prime train validate``
#: ran them), the shipped JSON Schema snapshot with the validator mirrors (``snapshot``), or our
#: rules alone (``structural``: the snapshot itself failed).
Backend = Literal["real", "snapshot", "structural"]
Severity = Literal["error", "warning", "note"]
#: Where a finding comes from (docs/validation.md, "The hosted pipeline"): ``file`` our rules on
#: the parsed TOML (tools/configs/_rules.py); ``cli`` what ``prime train`` does before the
#: worker (deprecated keys); ``schema`` the RLConfig/SFTConfig pass with environment sources
#: set aside; ``hosted`` the worker's hosted rejections; ``deferred`` the worker's check of the
#: set-aside blocks; ``run_start`` the full schema with sources kept (what the platform checks
#: when the run starts); ``backend`` the back-end itself (interpreter problems, fall-back).
Stage = Literal["file", "cli", "schema", "hosted", "deferred", "run_start", "backend"]


@dataclass(frozen=True)
class Finding:
    """One problem or remark about a config.

    ``loc``: key path as a tuple (str keys, int list indexes), ``()`` = the whole file;
    ``path``: the same, dotted (``orchestrator.train.source[0].name``); ``message``: what is
    wrong (messages name keys and quote numbers, model names and types; the report scrubs
    anything secret-looking before it leaves); ``rule``: the id of a rule of
    :data:`tools.configs._rules.RULES` (a prime-rl validator ``module.Class.function``, a hosted
    rule such as ``clean``), the JSON Schema keyword (``schema:additionalProperties``) or the
    pydantic error type (``pydantic:int_parsing``) that fired; ``kind``: pydantic's error type
    when known (``value_error`` for a model validator, ``assertion_error`` for an ``assert``,
    ``extra_forbidden`` for an unknown key), used to mirror the worker's filter of set-aside
    blocks and to suggest fixes; ``source``: file and function of the rule in prime-rl or
    prime, for people.
    """

    loc: tuple[str | int, ...]
    message: str
    rule: str
    severity: Severity = "error"
    stage: Stage = "schema"
    kind: str = "value_error"
    source: str = ""

    @property
    def path(self) -> str:
        """Dotted key path (``''`` = the whole file), list indexes as ``[i]``."""
        return dotted(self.loc)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (``loc`` as a list, plus ``path``)."""
        out = asdict(self)
        out["loc"] = list(self.loc)
        out["path"] = self.path
        return out


@dataclass
class Verdict:
    """What one back-end says about one config.

    ``valid``: no finding of severity ``error``; ``findings``: errors first, in the order the
    platform reports them (the first one is what ``prime train validate`` prints), then
    warnings and notes; ``schema_commit``: the prime-rl commit whose schema decided (40 hex, or
    ``"unknown"``) and ``schema_source`` where that commit came from; ``elapsed_seconds``: wall
    time of the check (for the real back-end including the interpreter start when it was cold);
    ``fallback_from``: set when this verdict is the snapshot's because the back-end asked for
    (``real`` or ``prime``) could not run (its finding is among ``findings``, stage
    ``backend``); ``cached``: the verdict was remembered (memory or the state folder), not
    computed again.
    """

    backend: Backend
    mode: Mode
    findings: list[Finding] = field(default_factory=list)
    schema_commit: str = "unknown"
    schema_source: str = ""
    interpreter: str | None = None
    elapsed_seconds: float = 0.0
    fallback_from: Literal["real", "prime"] | None = None
    cached: bool = False

    @property
    def valid(self) -> bool:
        """True when no finding is an error."""
        return not any(f.severity == "error" for f in self.findings)

    @property
    def errors(self) -> list[Finding]:
        """The error findings, first one first."""
        return [f for f in self.findings if f.severity == "error"]

    @property
    def first_error(self) -> Finding | None:
        """The error the platform would print first, or None when valid."""
        errors = self.errors
        return errors[0] if errors else None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict with ``valid`` and the findings as dicts."""
        return {"backend": self.backend, "mode": self.mode, "valid": self.valid,
                "findings": [f.to_dict() for f in self.findings], "schema_commit": self.schema_commit,
                "schema_source": self.schema_source, "interpreter": self.interpreter,
                "elapsed_seconds": self.elapsed_seconds, "fallback_from": self.fallback_from}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        """The inverse of :meth:`to_dict` (the on-disk cache). Raises KeyError/TypeError/ValueError
        on something else."""
        findings = [Finding(tuple(f["loc"]), f["message"], f["rule"], severity=f["severity"], stage=f["stage"],
                            kind=f["kind"], source=f["source"]) for f in data["findings"]]
        return cls(data["backend"], data["mode"], findings, schema_commit=data["schema_commit"],
                   schema_source=data["schema_source"], interpreter=data["interpreter"],
                   elapsed_seconds=float(data["elapsed_seconds"]), fallback_from=data["fallback_from"])


@dataclass
class PassResult:
    """One validation of one table by a back-end's schema pass (``RLConfig``/``SFTConfig``
    ``model_validate`` or its snapshot equivalent).

    ``errors``: in pydantic's order, empty when valid; ``resolved``: when valid, the validated
    config with defaults filled in (``model_dump(mode="json")`` for the real back-end), which
    the hosted rejections read; ``warnings``: what the validators warned about (pydantic
    ``warnings.warn``); ``exception``: a failure that is not a validation error (a taskset
    package that is not installed), message only; ``skipped``: environments whose taskset package
    the interpreter lacks, judged without their taskset's own settings (the import errors);
    ``remarks``: warnings at a key path (the snapshot: ids its schema commit does not know)."""

    errors: list[Finding] = field(default_factory=list)
    resolved: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    exception: str | None = None
    skipped: list[str] = field(default_factory=list)
    remarks: list[Finding] = field(default_factory=list)


def dotted(loc: Sequence[str | int]) -> str:
    """``("a", "b", 0, "c")`` -> ``"a.b[0].c"``; ``()`` -> ``""``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def key_path(loc: Sequence[Any], data: Any, kind: str | None = None,
             tags: Collection[str] = ()) -> tuple[str | int, ...]:
    """The key path in ``data`` of a pydantic error location ``loc`` of error type ``kind``.

    Walks ``data`` with ``loc``. A segment that is a key of the current table (or an index of
    the current list) is kept and followed. A segment that is not is a union branch label and
    is dropped when: it is the tag value of the current table (``type = "adamw"``), the next
    segment is a key of the current table, it has the shape of a pydantic type label (``int``,
    ``literal['auto']``, ``function-after[...]``, ``dict[str,any]``), the current value is not a
    table, or it is one of ``tags`` (the schema's union tags: a tag pydantic filled in from a
    default, ``deployment.single_node``). Otherwise it is kept: a missing field, or a key a
    before-validator filled in (``trainer.model`` from a shared ``[model]``).
    """
    out: list[str | int] = []
    node = data
    items = list(loc)
    for i, seg in enumerate(items):
        last = i == len(items) - 1
        if isinstance(node, dict):
            if seg in node:
                out.append(seg)
                node = node[seg]
                continue
            tag_values = {v for v in node.values() if isinstance(v, str)}
            label = (seg in tag_values or (not last and items[i + 1] in node) or _is_type_label(seg)
                     or (seg in tags and kind != "missing"))
            if label:
                continue
            out.append(seg)
            node = None
            continue
        if isinstance(node, list) and isinstance(seg, int):
            out.append(seg)
            node = node[seg] if -len(node) <= seg < len(node) else None
            continue
        if node is None and not _is_type_label(seg):
            out.append(seg)
        # otherwise: a scalar or a list followed by labels of its union members
    return tuple(out)


def _is_type_label(seg: Any) -> bool:
    """pydantic's labels for union members: type names, ``literal[...]``, ``function-*[...]``."""
    if not isinstance(seg, str):
        return False
    return (seg in {"int", "float", "str", "bool", "dict", "list", "none", "nullable", "is-instance"}
            or seg.startswith(("literal[", "function-", "dict[", "list[", "constrained-", "lax-", "json-or-python"))
            or seg.endswith("]"))
