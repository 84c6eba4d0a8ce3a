"""The fault matrix: every registry tool against every fault of the emulator, over real HTTP.

A **cell** is one tool and one fault. Its calls:

1. A clean **baseline** on a fresh stage (:mod:`tests._proof.world`) must give a result; the
   emulator notes the routes it used (``emu.faults.seen``): the tool's **targets**, and how many
   runs a clean call creates.
2. Per target, the fault is put on that route (``route_path``) and the tool called, once with
   the fault on **every** request to the route and, for faults a retry may get past, once on the
   **first** request only. Connection refused points the platform, then the traces host, at a
   closed port. Commit-then-timeout applies to the routes a tool writes with (not GET).
   A tool that sends nothing gets the fault on every route once (it must not notice).
3. A tool that changes something is then called again with the same arguments and no fault, as
   an agent retrying would.

Every call must end in a result or a typed ToolError (a code of ``ErrorCode`` other than
``internal_error``, with a ``fix``), within :data:`HANG_SECONDS`; afterwards no file under the
stage's folders may be a temporary or partial one, or a JSON / TOML / PNG file that does not
parse whole, and the calls of a cell may not create more runs than one clean call does.
"""

from __future__ import annotations

import json
import time
import tomllib
import typing
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from skill import registry
from skill.emulator import EmulatorServer, FaultRule, closed_port, route_path
from tests._proof.world import SetupError, Stage, arguments, missing_setups
from tools.errors import ErrorCode, ToolError
from tools.platform import Timeouts

#: A call taking longer than this (wall seconds) is a hang: the tools' own bounds are far below it
#: with the stage's half-second timeouts and a clock on which no wait takes time.
HANG_SECONDS = 20.0
#: Longest hold of an answer (wall seconds): beyond the half-second read timeout.
HOLD_SECONDS = 1.0
CODES = frozenset(typing.get_args(ErrorCode))
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@dataclass(frozen=True)
class Fault:
    """One column: an emulator fault kind and its fields, or ``refused`` (a closed port).

    ``transient``: a retry may get past it, so it is also tried on the first request only.
    ``writes``: applies to the routes a tool writes with (commit-then-timeout).
    """

    name: str
    kind: str
    fields: dict[str, Any] = field(default_factory=dict)
    transient: bool = False
    writes: bool = False

    def rule(self, path: str, method: str, times: int | None) -> FaultRule:
        return FaultRule(kind=self.kind, method=method, path=path, times=times, **self.fields)


FAULTS: tuple[Fault, ...] = (
    *(Fault(str(code), "status", {"status": code}) for code in (401, 402, 403, 404, 409, 422)),
    Fault("429", "status", {"status": 429, "retry_after": 1}, transient=True),
    Fault("500", "status", {"status": 500}),
    *(Fault(str(code), "status", {"status": code}, transient=True) for code in (502, 503, 504)),
    Fault("refused", "refused", transient=True),
    Fault("timeout", "delay", {"delay": HOLD_SECONDS}, transient=True),
    Fault("stall", "stall", {"delay": HOLD_SECONDS, "after_bytes": 8}, transient=True),
    Fault("reset", "cut", {"after_bytes": 8, "mode": "reset"}, transient=True),
    Fault("trunc", "truncate"),
    Fault("drip", "drip", {"chunk_bytes": 4096, "interval": 0.05}),
    Fault("commit", "commit_then_timeout", {"mode": "drop"}, writes=True),
)
FAULT_NAMES = {
    "timeout": "read timeout before the first byte (held 1 s, read timeout 0.5 s)",
    "stall": "read timeout in the middle of the body",
    "reset": "TCP reset in the middle of the body",
    "trunc": "200 with truncated JSON",
    "drip": "slow drip (4 kB every 50 ms)",
    "commit": "commit then timeout (create, resume, control calls)",
    "refused": "connection refused (platform, then traces host)",
    "429": "429 with Retry-After: 1",
}


#: The error codes a call may end in under each status fault (a tool may also get past a fault on a route it can
#: do without, with a result). Every other fault (429, 5xx, refused, timeouts, a cut or slow body, a lost answer)
#: must end in a result, or in an error that is retryable or ambiguous: nothing there says "do not try again".
EXPECTED_CODES: dict[str, frozenset[str]] = {
    "401": frozenset({"unauthorized"}), "402": frozenset({"payment_required"}), "403": frozenset({"forbidden"}),
    # a 404 on a route the platform may lack (the models list: no price) changes what dispatch recomputes
    "404": frozenset({"not_found", "volume_not_found", "plan_changed"}), "409": frozenset({"conflict"}),
    "422": frozenset({"invalid_request"}),
}


def misclassified(fault: str, error: ToolError) -> str | None:
    """None when ``error`` is of the class ``fault`` calls for (:data:`EXPECTED_CODES`); else what is wrong."""
    expected = EXPECTED_CODES.get(fault)
    if expected is not None:
        wanted = " or ".join(sorted(expected))
        return None if error.code in expected else f"{error.code} where {fault} calls for {wanted}"
    if error.retryable or error.ambiguous:
        return None
    return f"{error.code} (neither retryable nor ambiguous) where {fault} calls for a retry or a reconciliation"


@dataclass
class Problem:
    """Something a call must never do."""

    kind: str  # unhandled | misclassified | duplicate | partial | hang | setup
    tool: str
    fault: str
    where: str
    detail: str


@dataclass
class Cell:
    """The outcome of one tool x fault."""

    tool: str
    fault: str
    applicable: bool = True
    calls: int = 0
    results: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    longest: float = 0.0

    @property
    def mark(self) -> str:
        if not self.applicable:
            return "-"
        if self.problems:
            return "X"
        return ("r" if self.results else "") + ("e" if self.errors else "")


@dataclass
class Report:
    cells: list[Cell]
    setup_problems: list[Problem]
    seconds: float

    def count(self, kind: str) -> int:
        return sum(1 for c in self.cells for p in c.problems if p.kind == kind)

    @property
    def applicable(self) -> list[Cell]:
        return [c for c in self.cells if c.applicable]

    @property
    def passed(self) -> int:
        return sum(1 for c in self.applicable if not c.problems)

    @property
    def ok(self) -> bool:
        return not self.setup_problems and self.passed == len(self.applicable)


# -- one call ----------------------------------------------------------------------------------------


class _Caller:
    """Runs calls in a worker thread, so that a hang is seen (and abandoned) instead of waited on."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fault-matrix")

    def call(self, fn: Callable[[], Any]) -> tuple[Any, float, bool]:
        started = time.monotonic()
        future = self._pool.submit(fn)
        try:
            value = future.result(timeout=HANG_SECONDS)
        except FutureTimeout:
            self._pool.shutdown(wait=False)  # abandon the stuck thread
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fault-matrix")
            return None, time.monotonic() - started, True
        except BaseException as exc:  # noqa: BLE001 - an exception escaping call_tool is what we look for
            value = exc
        return value, time.monotonic() - started, False

    def close(self) -> None:
        self._pool.shutdown(wait=False)


def judge(value: Any) -> str | None:
    """None when ``value`` is a result or a typed ToolError; else what is wrong."""
    if isinstance(value, BaseException):
        return f"raised {type(value).__name__}: {value}"
    if not isinstance(value, BaseModel):
        return f"returned {type(value).__name__}, not a model"
    text = value.model_dump_json()
    if "Traceback (most recent call last)" in text:
        return "a traceback in the output"
    if isinstance(value, ToolError):
        if value.code == "internal_error" or value.code not in CODES:
            return f"{value.code}: {value.message}"
        if not value.fix:
            return f"{value.code} without a fix"
    return None


def bad_files(root: Path) -> list[str]:
    """Temporary or partial files under ``root``, and JSON / JSONL / TOML / PNG files that do not
    parse whole."""
    bad = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        name, rel = path.name, str(path.relative_to(root))
        if name.startswith(".") and name.endswith((".partial", ".tmp")) or name.endswith((".part", "~")):
            bad.append(f"{rel} (temporary file left)")
            continue
        try:
            data = path.read_bytes()
            if path.suffix == ".json":
                json.loads(data)
            elif path.suffix == ".jsonl":
                for line in data.splitlines():
                    json.loads(line)
            elif path.suffix == ".toml":
                tomllib.loads(data.decode())
            elif path.suffix == ".png" and not (data.startswith(PNG_SIGNATURE) and data.endswith(b"IEND\xaeB`\x82")):
                raise ValueError("not a whole PNG")
        except (ValueError, UnicodeDecodeError) as exc:
            bad.append(f"{rel} (does not parse whole: {type(exc).__name__})")
    return bad


# -- the matrix --------------------------------------------------------------------------------------


@dataclass
class _Tool:
    name: str
    writes: bool  # changes something (not read-only): fresh stage per call, called again after
    targets: list[tuple[str, str]]  # (method, route template), as the clean call used them
    creates: int  # runs a clean call creates


class Matrix:
    """Runs cells over one emulator; ``root`` holds every stage's folders."""

    def __init__(self, emu: EmulatorServer, root: Path, *, progress: Callable[[str], None] | None = None) -> None:
        self.emu, self.root = emu, root
        self.progress = progress or (lambda line: None)
        self._caller = _Caller()
        self._stages = 0
        self._shared: dict[str, tuple[Stage, dict[str, Any]]] = {}

    def close(self) -> None:
        self._caller.close()
        for stage, _ in self._shared.values():
            stage.close()

    def _stage(self) -> Stage:
        self._stages += 1
        return Stage(self.emu, self.root / f"stage-{self._stages:05d}")

    def _staged(self, tool: _Tool) -> tuple[Stage, dict[str, Any]]:
        """A stage and arguments: fresh for a tool that changes things, else the tool's shared one
        (reset to its state: faults cleared)."""
        if tool.writes or tool.name not in self._shared:
            stage = self._stage()
            staged = stage, arguments(tool.name, stage)
            if tool.writes:
                return staged
            self._shared[tool.name] = staged
        stage, args = self._shared[tool.name]
        self.emu.faults.clear()
        return stage, args

    def baseline(self, name: str) -> _Tool:
        """The clean call: its targets and the runs it creates. SetupError if it does not give a result."""
        spec = registry.get(name)
        stage = self._stage()
        args = arguments(name, stage)
        ctx = stage.context(timeouts=Timeouts())  # a loaded machine cannot make the clean call fail
        before = len(self.emu.state.runs)
        self.emu.faults.seen.clear()
        result = registry.call_tool(name, args, ctx)
        ctx.close()
        self.emu.faults.wait_idle()
        if isinstance(result, ToolError):
            raise SetupError(f"the clean call of {name} failed ({result.code}: {result.message}); fix its set-up")
        targets = list(dict.fromkeys((s.method, s.route) for s in self.emu.faults.seen))
        tool = _Tool(name, writes=not spec.read_only, targets=targets, creates=len(self.emu.state.runs) - before)
        stage.close()
        return tool

    def cell(self, tool: _Tool, fault: Fault) -> Cell:
        cell = Cell(tool.name, fault.name)
        for where, prepare in self._variants(tool, fault):
            self._attempt(tool, fault, cell, where, prepare)
        cell.applicable = cell.calls > 0
        return cell

    def _variants(self, tool: _Tool, fault: Fault) -> Iterable[tuple[str, Callable[[Stage], dict[str, str]]]]:
        """(where, prepare): ``prepare(stage)`` puts the fault in place and returns URL overrides."""
        if fault.kind == "refused":
            for host in ("base_url", "traces_url"):
                yield f"{host.removesuffix('_url')} host", lambda s, h=host: {h: self._dead.url}
            return
        targets = [t for t in tool.targets if not fault.writes or t[0] != "GET"]
        if not tool.targets and not fault.writes:
            targets = [("*", "*")]
        for method, route in targets:
            path = "*" if route == "*" else route_path(route)
            for times in ((None, 1) if fault.transient else (None,)):
                label = f"{method} {route}" + (" (first request)" if times == 1 else "")
                yield label, lambda s, m=method, p=path, t=times: (s.emu.faults.add(fault.rule(p, m, t)), {})[1]

    def _attempt(self, tool: _Tool, fault: Fault, cell: Cell, where: str,
                 prepare: Callable[[Stage], dict[str, str]]) -> None:
        def problem(kind: str, detail: str) -> None:
            cell.problems.append(Problem(kind, tool.name, fault.name, where, detail))

        try:
            stage, args = self._staged(tool)
        except SetupError as exc:
            problem("setup", str(exc))
            return
        before = len(self.emu.state.runs)
        urls = prepare(stage)
        ctx = stage.context(**urls)
        self._one(cell, ctx, tool, args, problem)
        self.emu.faults.clear()
        if not self.emu.faults.wait_idle(HANG_SECONDS):
            problem("hang", "the emulator still holds a request")
        if tool.writes:  # an agent calling again after the failure
            retry = stage.context()
            self._one(cell, retry, tool, args, problem, again=True)
            self.emu.faults.wait_idle(HANG_SECONDS)
        created = len(self.emu.state.runs) - before
        if created > tool.creates:
            problem("duplicate", f"{created} runs created where a clean call creates {tool.creates}")
        for bad in bad_files(stage.root):
            problem("partial", bad)
        if tool.writes:
            stage.close()

    def _one(self, cell: Cell, ctx: Any, tool: _Tool, args: dict[str, Any], problem: Callable[[str, str], None],
             *, again: bool = False) -> None:
        value, seconds, hung = self._caller.call(lambda: registry.call_tool(tool.name, args, ctx))
        ctx.close() if not hung else None
        cell.calls += 1
        cell.longest = max(cell.longest, seconds)
        suffix = " (called again without the fault)" if again else ""
        if hung:
            problem("hang", f"no answer after {HANG_SECONDS:g} s{suffix}")
            return
        wrong = judge(value)
        if wrong:
            problem("unhandled", wrong + suffix)
        elif isinstance(value, ToolError):
            cell.errors[value.code] = cell.errors.get(value.code, 0) + 1
            mismatch = None if again else misclassified(cell.fault, value)
            if mismatch:
                problem("misclassified", mismatch)
        else:
            cell.results += 1

    def run(self, tools: Iterable[str], faults: Iterable[Fault]) -> Report:
        started = time.monotonic()
        faults = list(faults)
        cells: list[Cell] = []
        setup_problems = [Problem("setup", name, "-", "-", "no set-up in tests/_proof/world.py SETUPS")
                          for name in missing_setups()]
        with closed_port() as dead:
            self._dead = dead
            for name in tools:
                try:
                    tool = self.baseline(name)
                except SetupError as exc:
                    setup_problems.append(Problem("setup", name, "-", "-", str(exc)))
                    continue
                for fault in faults:
                    cell = self.cell(tool, fault)
                    cells.append(cell)
                routes = ", ".join(f"{m} {r}" for m, r in tool.targets) or "none"
                self.progress(f"{name}: {sum(c.calls for c in cells if c.tool == name)} calls, "
                              f"{time.monotonic() - started:.0f} s; routes: {routes}")
        return Report(cells, setup_problems, time.monotonic() - started)


def run_matrix(tools: Iterable[str] | None = None, faults: Iterable[Fault] = FAULTS, *, root: Path,
               workers: int = 3, progress: Callable[[str], None] | None = None) -> Report:
    """Run the matrix (default: every registry tool x every fault). ``workers`` emulators serve
    the tools side by side (most of a cell's time is spent waiting out timeouts and held answers)."""
    names = [spec.name for spec in registry.TOOLS] if tools is None else list(tools)
    faults = list(faults)
    started = time.monotonic()

    def share(index: int) -> Report:
        with EmulatorServer(speed=0) as emu:
            matrix = Matrix(emu, root / f"worker-{index}", progress=progress)
            try:
                return matrix.run(names[index::workers], faults)
            finally:
                matrix.close()

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fault-matrix-worker") as pool:
        reports = list(pool.map(share, range(min(workers, len(names)) or 1)))
    order = {name: i for i, name in enumerate(names)}
    cells = sorted((c for r in reports for c in r.cells), key=lambda c: order[c.tool])
    setup = {(p.tool, p.detail): p for r in reports for p in r.setup_problems}
    return Report(cells, list(setup.values()), time.monotonic() - started)


# -- printing ----------------------------------------------------------------------------------------


def render(report: Report, faults: Iterable[Fault] = FAULTS) -> str:
    """The table (tools x faults), the totals and every problem, as text."""
    faults = list(faults)
    by = {(c.tool, c.fault): c for c in report.cells}
    tools = list(dict.fromkeys(c.tool for c in report.cells))
    width = max([len(t) for t in tools] + [4])
    lines = ["".ljust(width) + "".join(f.name.rjust(len(f.name) + 1) for f in faults) + "  calls  longest"]
    for tool in tools:
        row = [(f, by[(tool, f.name)]) for f in faults if (tool, f.name) in by]
        lines.append(tool.ljust(width) + "".join(c.mark.rjust(len(f.name) + 1) for f, c in row)
                     + f"{sum(c.calls for _, c in row):7d}  {max(c.longest for _, c in row):5.1f} s")
    lines += ["", "r: every call gave a result (unaffected, or a retry got past the fault); e: typed errors; "
              "re: both;", "-: not applicable (commit-then-timeout on a tool that only reads); X: a problem below.",
              "Columns: " + "; ".join(f"{k}: {v}" for k, v in FAULT_NAMES.items()) + "."]
    codes: dict[str, dict[str, int]] = {}
    for c in report.cells:
        for code, n in c.errors.items():
            codes.setdefault(c.fault, {}).setdefault(code, 0)
            codes[c.fault][code] += n
    lines += ["", "Error codes returned, per fault:"]
    for f in faults:
        seen = codes.get(f.name, {})
        ranked = sorted(seen.items(), key=lambda item: -item[1])
        lines.append(f"  {f.name:8s} " + ", ".join(f"{code} {n}" for code, n in ranked))
    applicable = report.applicable
    lines += ["", f"cells: {len(applicable)} (tools: {len(tools)}, faults: {len(faults)}; "
                  f"{len(report.cells) - len(applicable)} not applicable), calls: {sum(c.calls for c in applicable)}",
              f"passed: {report.passed}, unhandled: {report.count('unhandled')}, "
              f"duplicates: {report.count('duplicate')}, partial files: {report.count('partial')}, "
              f"hangs: {report.count('hang')}, "
              f"set-up failures: {len(report.setup_problems) + report.count('setup')}",
              f"longest call: {max((c.longest for c in report.cells), default=0):.1f} s, "
              f"time: {report.seconds:.0f} s"]
    problems = report.setup_problems + [p for c in report.cells for p in c.problems]
    if problems:
        lines += ["", "Problems:"] + [f"  {p.kind:9s} {p.tool} x {p.fault} at {p.where}: {p.detail}"
                                      for p in problems]
    return "\n".join(lines)

