"""Human output of tool results: what happened and what's next first, then the facts and tables,
laid out by :mod:`skill.terminal` (80 columns, no split ids, data when piped).

Where each part goes (STYLE.md §6):

- stderr: the opening lines (what happened), ``Next:`` hints, notes (what was left out),
  errors with their ``Fix:``, progress bars. On a terminal they interleave with stdout in order.
- stdout: the result's data: ``name  value`` facts and tables on a terminal. Piped, the same
  data in one layout per command, whatever the result holds: the facts as ``name<TAB>value``
  rows, then each table after an empty line, as a header row of field names and tab-separated
  rows. A list command's data is its rows (:attr:`View.rows_are_data`): piped, its stdout is the
  table alone (``| cut -f1`` reads ids only) and its facts go to stderr, with or without rows.
  Prose (``lead`` lines: evidence, caps) is data for a person only: piped, it goes to stderr.
  Empty values and bookkeeping (``truncated`` false, ``omitted`` 0, ``narrow_hint`` unset) are
  left out.


Hints name tools for agents; a person reads commands. A hint's calls are structured
(:class:`tools.errors.Call`, in ``next_calls``): each quoted call in the text is replaced by the
command that makes it, in backticks (:func:`command`): ``mf_get_logs(run_id="r1",
component="env-server")`` becomes ```model-factory get-logs r1 --component env-server```,
positional fields in place, the others as options, every value shell-quoted, the program named so
the person's shell finds it (:func:`tools.core.program`). No text is parsed for arguments: a bare
tool name left in a text (no call declared) becomes the command when the tool needs no
argument, else just the command's name; a command written in a text as ```model-factory ...```
(not a tool: ``emulator``, ``approve``) gets the program's name as this installation needs it.


Each tool may have a view (:data:`_VIEWS`) writing its opening line and its own next steps
(built as calls, so they too are complete commands); any other tool, including new ones, gets the
generic view (its ``message``/``summary``/``note`` and ``next_step``, every field).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TextIO, cast

from pydantic import BaseModel

from skill import registry, terminal
from tools import units
from tools.core import PROGRAM, program, quote
from tools.errors import Call, call
from tools.guardrails.text import shown
from tools.platform import wire

#: Fields that only say what the output budget left out: shown only when they say something.
_BOOKKEEPING = ("truncated", "omitted", "narrow_hint")
#: Rows shown per table on a terminal (piped: every row the result has).
MAX_ROWS = 50
_TOOL_NAME = re.compile(r"\bmf_[a-z_]+\b")
_OUR_COMMAND = re.compile(r"`model-factory ")


# -- hints: calls as commands -----------------------------------------------------------------


def command(c: Call, env: dict[str, str] | None = None) -> str:
    """The shell command that makes call ``c``: ``<program> <command> POSITIONAL... --option value``;
    lists repeat their option, booleans are ``--flag`` / ``--no-flag``, every value shell-quoted.
    A value starting with ``-`` is written ``--option=value`` (a positional one after ``--``), so
    it is never read as an option."""
    spec = registry.get(c.tool)
    options: list[str] = []
    for name, value in c.arguments.items():
        if name in spec.positional or value is None:
            continue
        option = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            options.append(option if value else "--no-" + name.replace("_", "-"))
            continue
        for item in value if isinstance(value, (list, tuple)) else [value]:
            text = str(item)
            options += [quote(f"{option}={text}")] if text.startswith("-") else [option, quote(text)]
    positional = [str(v) for n in spec.positional if c.arguments.get(n) is not None
                  for v in (c.arguments[n] if isinstance(c.arguments[n], (list, tuple)) else [c.arguments[n]])]
    words = [quote(w) for w in positional]
    if any(w.startswith("-") for w in positional):
        return " ".join([program(env), spec.command, *options, "--", *words])
    return " ".join([program(env), spec.command, *words, *options])


def for_people(text: str, calls: Iterable[Call] = ()) -> str:
    """A hint written for agents as a person reads it: each call of ``calls`` quoted in ``text``
    becomes its command in backticks (a call not quoted is added as ``Run `...`.``); a bare tool
    name left over becomes the command when it needs no argument, else the command's name."""
    for c in calls:
        try:
            shown = f"`{command(c)}`"
        except KeyError:  # not a tool of this registry
            continue
        quoted = str(c)
        if f"`{quoted}`" in text:
            text = text.replace(f"`{quoted}`", shown)
        elif quoted in text:
            text = text.replace(quoted, shown)
        else:
            text = f"{text.rstrip()} Run {shown}."

    def bare(match: re.Match[str]) -> str:
        try:
            spec = registry.get(match[0])
        except KeyError:
            return match[0]
        needs = [n for n, f in spec.input_model.model_fields.items() if f.is_required()]
        return f"`{program()} {spec.command}`" if not needs else spec.command

    text = _TOOL_NAME.sub(bare, text)
    ours = program()
    if ours != PROGRAM:  # a command written as `model-factory ...` runs this installation
        text = _OUR_COMMAND.sub(lambda m: f"`{ours} ", text)
    return text


# -- values for people and for pipes ------------------------------------------------------------


def display(key: str, value: Any) -> str:
    """A value as a person reads it ('' for nothing): an amount in the unit its field name says, written
    by that unit's one formatter (:mod:`tools.units`: ``$1.80``, ``3 min 20 s``, ``1.5 GB``), yes/no,
    4 significant digits, times to the second in UTC (``2026-12-01 10:00:00 UTC``)."""
    if value is None or value == "" or value == [] or value == {}:
        return ""
    if isinstance(value, BaseModel):
        value = value.model_dump()
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)) and (text := units.text_for_field(key, value)) is not None:
        return text
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:.4g}"
    if isinstance(value, datetime):  # in UTC, and saying so (the platform's times are UTC; one without a zone too)
        return (value.astimezone(UTC) if value.tzinfo else value).strftime("%Y-%m-%d %H:%M:%S UTC")
    if isinstance(value, dict):
        return ", ".join(f"{k} {display(k, v)}" for k, v in value.items() if v not in (0, None, "", [], {}))
    if isinstance(value, (list, tuple)):
        sentences = any(isinstance(v, str) and v.endswith(".") for v in value)
        return (" " if sentences else ", ").join(display(key, v) for v in value if v is not None)
    return str(value)


def raw(value: Any) -> str:
    """A value as data (a TSV cell): full precision, ISO times, true/false, lists comma-joined."""
    if value is None:
        return ""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return ",".join(f"{k}={raw(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ",".join(raw(v) for v in value)
    return str(value)


def _empty(value: Any) -> bool:
    return value is None or value == "" or value == [] or value == {}


def _objects(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, (BaseModel, dict)) for v in value)


def _plain(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, BaseModel) else value


# -- a view: what is printed for one result ------------------------------------------------------


@dataclass
class Table:
    """One list of the result: its rows (dicts of values) and the columns to show, most important
    first (``keep`` of them are never dropped)."""

    name: str
    rows: list[dict[str, Any]]
    columns: list[str]
    keep: int = 1
    title: str | None = None


@dataclass
class View:
    """The parts of a result's output: ``opening`` lines, ``next`` hints (texts with their calls),
    ``lead`` (lines that are the heart of the result, e.g. evidence, printed before the facts),
    ``facts`` (field, value), ``tables``, ``text`` (preformatted lines, e.g. log lines), ``notes``."""

    opening: list[str] = field(default_factory=list)
    lead: list[str] = field(default_factory=list)
    next: list[tuple[str, list[Call]]] = field(default_factory=list)
    facts: list[tuple[str, Any]] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: The result's data is its rows (a list command): piped, stdout holds the table alone.
    rows_are_data: bool = False

    def hint(self, text: str, *calls: Call) -> None:
        self.next.append((text, list(calls)))

    def drop(self, *names: str) -> None:
        self.facts = [(k, v) for k, v in self.facts if k not in names]

    def table(self, name: str) -> Table | None:
        return next((t for t in self.tables if t.name == name), None)


def generic_view(result: BaseModel) -> View:
    """Every non-empty field: scalars (and one level of nested models) as facts, lists of objects
    as tables of their non-empty scalar columns; ``next_step``/``next_calls`` as the hint; the
    bookkeeping fields as a note when they say something was left out."""
    view = View()
    fields = dict(result)
    for key, value in fields.items():
        if key in ("next_step", "next_calls", *_BOOKKEEPING) or _empty(value):
            continue
        if _objects(value):
            rows = [_plain(v) for v in value]
            columns = [c for c in rows[0] if any(_scalar(r.get(c)) and not _empty(r.get(c)) for r in rows)]
            view.tables.append(Table(key, rows, columns))
        elif isinstance(value, BaseModel):
            for sub, sub_value in value:
                if not _empty(sub_value) and not _objects(sub_value):
                    view.facts.append((f"{key}.{sub}", sub_value))
        elif key == "rows" and isinstance(fields.get("columns"), list):
            view.tables.append(Table("rows", [dict(zip(fields["columns"], r, strict=False)) for r in value],
                                     list(fields["columns"])))
        elif key != "columns":
            view.facts.append((key, value))
    for key in ("message", "summary", "note"):
        if isinstance(fields.get(key), str) and fields[key]:
            view.opening.append(fields[key])
            view.drop(key)
            break
    if isinstance(fields.get("next_step"), str) and fields["next_step"]:
        view.hint(fields["next_step"], *fields.get("next_calls", []))
    if fields.get("truncated") is True:
        left = fields.get("omitted")
        hint = fields.get("narrow_hint") or ""
        quoted = [c for c in fields.get("next_calls") or [] if str(c) in hint]  # as commands, not tool calls
        view.notes.append("Part of the result is not shown" + (f" ({display('omitted', left)} left out)" if left
                                                                  else "") + ". `--json` has what was kept."
                          + (f" {for_people(hint, quoted)}" if hint else ""))
    return view


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool, datetime)) or (
        isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value))


# -- printing ------------------------------------------------------------------------------------


def printable(text: str) -> str:
    """``text`` with its non-printable characters escaped (``\\x1b``, ``\\n``, ``\\u202e``:
    :func:`tools.guardrails.text.shown`): what reaches the terminal. A config path, a run name or a
    platform's text moves no cursor and starts no line of its own; commands are already printable
    (:func:`command` quotes such a word as ``$'...'``). Text that is lines (a report) goes line by line."""
    return shown(text)


def show(view: View, out: terminal.Terminal | None = None, err: terminal.Terminal | None = None) -> None:
    """Print ``view``: opening and ``Next:`` on stderr, data on stdout, notes on stderr last."""
    out, err = out or terminal.stdout(), err or terminal.stderr()
    for line in view.opening:
        for wrapped in terminal.wrap(printable(for_people(line)), err.width, commands=True):
            err.print(err.style(wrapped, "1") if wrapped is not None else "")
    for text, calls in view.next:
        for wrapped in terminal.wrap(printable(f"Next: {for_people(text, calls)}"), err.width, "  ", commands=True):
            err.print(wrapped)
    if view.opening or view.next:
        if not out.piped:
            err.print()
    pairs = [(k, printable(raw(v))) if out.piped else (_label(k), printable(display(k, v)))
             for k, v in view.facts if not _empty(v)]
    blocks: list[list[str]] = []
    lead = [printable(for_people(line)) for line in view.lead]
    if lead and out.piped:  # prose for a person: off the data
        for line in lead:
            err.print(line)
    elif lead:
        blocks.append([w for line in lead for w in terminal.wrap(line, out.width, "  ", commands=True)])

    if pairs and out.piped and view.rows_are_data:
        for line in terminal.facts(pairs, out):  # piped, the rows are the data; the facts about them are context
            err.print(line)
    elif pairs:
        blocks.append(terminal.facts(pairs, out))
    for table in view.tables:
        if not table.rows:
            continue
        rows = table.rows if out.piped else table.rows[:MAX_ROWS]
        columns = table.columns if out.piped else (  # piped: the same columns whatever the rows hold
            [c for c in table.columns if any(not _empty(r.get(c)) for r in rows)] or table.columns[:1])
        cells = [[printable(raw(r.get(c)) if out.piped else display(c, r.get(c))) for c in columns] for r in rows]
        lines, dropped = terminal.table(columns, cells, out, keep=table.keep)
        if not out.piped:
            title = table.title or table.name.replace("_", " ")
            lines = [out.style(f"{title} ({len(table.rows)})", "1"), *lines]
            if dropped:
                view.notes.append(f"{title}: not shown at this width: {', '.join(dropped)} (`--json` has them).")
            if len(table.rows) > MAX_ROWS:
                view.notes.append(f"{title}: {len(table.rows) - MAX_ROWS} more rows not shown (`--json`, or pipe the "
                                  "output, has them).")
        blocks.append(lines)
    if view.text:
        blocks.append(terminal.block([printable(line) for line in view.text], out.width))  # lines already
    for n, block in enumerate(blocks):
        if n:  # piped too: an empty line before each table, so the sections can be told apart
            out.print()
        for line in block:
            out.print(line)
    for note in view.notes:
        for wrapped in terminal.wrap(printable(for_people(note)), err.width, "  ", commands=True):
            err.print(wrapped)


def _label(key: str) -> str:
    """A field name as a label: words, without the unit its value now shows (``waited_seconds``: waited)."""
    return key.removesuffix("_seconds").removesuffix("_bytes").replace(".", ": ").replace("_", " ")


def render_error(error: Any, err: terminal.Terminal | None = None, name: str | None = None) -> None:
    """Print a ToolError of tool ``name`` to stderr: code and message, each bad field, and the fix
    as commands, in the command line's words (:func:`cli_words`). A field's problem is said once:
    the bullet, not also the message."""
    err = err or terminal.stderr()
    spec = _spec(name)
    message, fields = error.message, list(getattr(error, "fields", []))
    said = False
    for problem in fields:  # a bare problem only when it is a sentence, not a word like "required"
        for repeated in (f"{problem.path}: {problem.problem}", problem.problem if len(problem.problem) > 20 else None):
            if problem.problem and repeated and repeated in message:
                message, said = message.replace(repeated, "", 1), True
                break
    if said:
        message = re.sub(r"[\s;:,]+$", "", message) + ":"
    # A message may carry a plan summary after its first line (a stop, pause or restart waiting for a person):
    # each of its lines is printed as a line, with its own indentation, its characters escaped.
    head, *summary = message.split("\n")
    message = printable(cli_words(for_people(head), spec))
    for line in terminal.wrap(f"{err.style('Error', '1', '31')} [{error.code}] {message}", err.width, "  ",
                              commands=True):
        err.print(line)
    for text in summary:
        lead = "  " + " " * (len(text) - len(text.lstrip(" ")))
        for line in terminal.wrap(printable(text.strip()), err.width, lead + "  ", lead):
            err.print(line)
    for problem in fields:
        path = cli_words(_argument(problem.path, spec), spec) if problem.path else "(input)"
        for line in terminal.wrap(printable(f"- {path}: {cli_words(problem.problem, spec)}"), err.width, "    ", "  "):
            err.print(line)
    if spec is not None and error.fix == registry.arguments_fix(spec.name):
        fix = f"Correct the listed options; `{program()} {spec.command} --help` shows what each takes."
    else:
        fix = printable(cli_words(for_people(error.fix, getattr(error, "next_calls", [])), spec))
    for line in terminal.wrap(f"{err.style('Fix:', '1')} {fix}", err.width, "  ", commands=True):
        err.print(line)


def _spec(name: str | None) -> Any:
    try:
        return registry.get(name) if name else None
    except KeyError:
        return None


def _argument(path: str, spec: Any) -> str:
    """An argument's path (``arguments.max_steps``, ``max_steps``, ``secrets.0``) as the command
    line names it: ``--max-steps``, ``CONFIG_PATH`` (a positional), ``--secrets`` (an item of it)."""
    field = path.removeprefix("arguments.").split(".")[0]
    if spec is None or field not in spec.input_model.model_fields:
        return path
    return field.upper() if field in spec.positional else "--" + field.replace("_", "-")


_ARGUMENT_PATH = re.compile(r"\barguments\.[a-z_]+(?:\.[\w.]+)?")
#: An agent's words about JSON arguments, and what they mean on a command line (every value there
#: is text, and leaving an option out is how it gets its default).
_CLI_PHRASES = ((" or null (the default)", ""), ("null (the default) or ", ""), (", got a string", ""),
                ("missing or null; ", ""), ("the input schema", "the command's --help"))
#: In an argument's description (a command's --help), null is an option left out.
_HELP_PHRASES = (("or null for", "or omit it for"), ("when null", "when omitted"), ("Null: ", "Omitted: "),
                 ("null: ", "omitted: "), ("null = ", "omitted: "))


def cli_words(text: str, spec: Any = None, *, help: bool = False) -> str:
    """A message written for agents as a person at the command line reads it: an argument's
    path as its option (``arguments.name`` is ``--name`` for ``spec``'s command), and phrases
    about JSON values (``or null (the default)``, ``got a string``) in command-line terms; with
    ``help`` (an argument's description), a null argument as an option left out. Tool names
    become commands in :func:`for_people` (in help, in the CLI's own help formatter)."""
    text = _ARGUMENT_PATH.sub(lambda m: _argument(m[0], spec), text)
    for agents, people in _CLI_PHRASES + (_HELP_PHRASES if help else ()):
        text = text.replace(agents, people)
    return text


def view_of(name: str, result: BaseModel) -> View:
    """The view of ``result`` of tool ``name``: the generic one, shaped by the tool's own view; a
    result still without an opening line says how many rows its first list has."""
    view = generic_view(result)
    view.rows_are_data = name.startswith("mf_list_")
    build = _VIEWS.get(name)
    if build is not None:
        build(result, view)
    if not view.opening:
        first = next((t for t in view.tables if t.rows), None)
        view.opening = [f"{_count(len(first.rows), _one((first.title or first.name).replace('_', ' ')))}." if first else
                        f"{registry.get(name).command}: nothing to list." if name in _LISTS else "Done."]
    return view


def render(name: str, result: BaseModel) -> None:
    """Print ``result`` of tool ``name`` for a person."""
    if getattr(result, "error", False) is True and hasattr(result, "fix"):
        render_error(result, name=name)
        return
    show(view_of(name, result))



# -- the views of the workflow's tools -------------------------------------------------------------


def _count(n: int, what: str) -> str:
    """``n`` and the noun ``what`` (singular), pluralised: ``1 volume``, ``9 launches``, ``2,000 runs``."""
    if n == 1:
        return f"1 {what}"
    return f"{n:,} {what}" + ("es" if what.endswith(("s", "sh", "ch", "x")) else "s")


def _one(plural: str) -> str:
    """The singular of a list's name (``launches``: launch, ``volumes``: volume)."""
    return plural[:-2] if plural.endswith(("sses", "shes", "ches", "xes")) else plural.removesuffix("s")


def _preflight(r: Any, v: View) -> None:
    v.drop("ok", "teams_total", "launch_would_stop_ambiguous")
    checks = v.table("checks")
    if checks:
        checks.columns, checks.keep = ["name", "ok", "detail"], 2
        checks.rows = [{**c, "ok": "ok" if c["ok"] else ("FAILED" if c["required"] else "no")} for c in checks.rows]
    for check in r.checks:
        if check.ok is False and check.fix:
            v.hint(f"{check.name}: {check.fix}")
            # said once: in its Next line, not also in the opening line
            v.opening = [" ".join(line.replace(check.fix, "").split()) for line in v.opening]
    if r.ok:
        v.hint(f"Start from a bundled example: {call('mf_list_examples')}.", call("mf_list_examples"))


def _list_examples(r: Any, v: View) -> None:
    ok = [e for e in r.examples if e.hosted_ok]
    v.opening = [f"{_count(r.count, 'bundled prime-rl example')}, {len(ok)} fit a hosted run."]
    v.drop("count")
    table = v.table("examples")
    if table:
        table.columns, table.keep = ["id", "mode", "gpu_count", "max_steps", "hosted_ok", "model_name",
                                     "hosted_reason"], 2
    if ok:
        example = next((e for e in ok if e.id == "basic/reverse-text/rl"), ok[0])
        first = call("mf_prepare_config", example=example.id, dest="my-run.toml")
        v.hint(f"Copy one to edit: {first}.", first)


def _validate(r: Any, v: View) -> None:
    name = r.config_path.rsplit("/", 1)[-1]
    verdict = {True: "valid", False: "not valid", None: "not judged by a schema"}[r.valid]
    schema = f"{r.schema_check} schema" + (f", {r.fallback_from} unavailable" if r.fallback_from else "")
    v.opening = [f"{name}: {verdict} ({r.mode.upper()}, {schema}): {_count(len(r.errors), 'error')}, "
                 f"{_count(len(r.warnings), 'warning')}."]
    v.drop("config_path", "valid")
    if r.valid and not r.fallback_from:  # what the check left to the platform matters when it found or missed something
        v.drop("schema_note")
    v.facts.insert(0, ("config_path", r.config_path))
    for issues in ("errors", "warnings"):
        table = v.table(issues)
        if table:
            table.columns, table.keep = ["path", "line", "message", "fix"], 2
    if r.valid:
        plan = call("mf_plan_run", config_path=r.config_path)
        v.hint(f"Plan it (costs nothing): {plan}.", plan)
    elif r.valid is None:  # only our rules ran: no plan is offered on that
        again = call("mf_validate_config", config_path=r.config_path, schema="real")
        v.hint(f"No schema judged it; check it with prime-rl's own schema: {again}.", again)
    else:
        again = call("mf_validate_config", config_path=r.config_path)
        v.hint(f"Fix the errors below, then check again: {again}.", again)


def _prepare(r: Any, v: View) -> None:
    v.opening = [f"Wrote {r.path} ({r.mode.upper()}, from {r.source}, {_count(len(r.changes), 'change')}); "
                 + ("it validates." if r.validation.valid else
                    "no schema judged it." if r.validation.valid is None else
                    f"{_count(len(r.validation.errors), 'validation error')}.")]
    if r.created_folders:  # made for it, as mkdir -p would
        v.opening.append(f"Created {_count(len(r.created_folders), 'folder')} for it: {', '.join(r.created_folders)}.")
    v.drop("path", "validation.valid", "created_folders")
    v.facts = [(k, val) for k, val in v.facts if not k.startswith("validation.")]
    nxt = call("mf_plan_run", config_path=r.path) if r.validation.valid else \
        call("mf_validate_config", config_path=r.path)
    v.hint(f"{'Plan it' if r.validation.valid else 'See what to fix'}: {nxt}.", nxt)


def _plan(r: Any, v: View) -> None:
    v.opening = [f"Planned {r.plan_id}: nothing launched, nothing spent."]
    v.next = []
    if getattr(r, "policy_approves", False):  # the agent may launch it without a person's code
        v.hint(f"Your budget policy {r.policy_path} covers this plan: the agent may launch it now, without a code.")
    else:
        v.hint(f"Approve it in a terminal: `{r.approve_command}` (it shows the plan again, then prints the command "
               "that launches it).")
    v.facts, v.tables = [], []
    v.text = r.summary.splitlines()[1:] if r.summary.startswith("Plan ") else r.summary.splitlines()



def _dispatch(r: Any, v: View) -> None:
    v.opening = [r.message or f"Run {r.run_id}: {r.status}."]
    v.drop("message")


def _get_run(r: Any, v: View) -> None:
    where = f", {r.runs_ahead} runs ahead" if r.runs_ahead else ""
    v.opening = [f"Run {r.run_id} is {r.status}{where}."]
    if wire.RunStatus.of(r.status) in ("RUNNING", "QUEUED", "PENDING"):
        nxt = call("mf_check_progress", run_id=r.run_id)
        v.hint(f"Is it progressing? {nxt}.", nxt)
    elif wire.RunStatus.of(r.status) == "FAILED":
        nxt = call("mf_summarize_logs", run_id=r.run_id)
        v.hint(f"Why it failed: {nxt}.", nxt)
    elif r.terminal:
        nxt = call("mf_run_report", run_id=r.run_id)
        v.hint(f"The end-of-run report: {nxt}.", nxt)


def _run_report(r: Any, v: View) -> None:
    verdict = f", {r.verdict.replace('_', ' ')}" if r.verdict and r.verdict != r.status.lower() else ""
    v.opening = [f"Run {r.run_id} is {r.status}{verdict}" + ("." if r.terminal else
                                                             " (not ended: the report is provisional).")]
    v.facts, v.tables = [], []
    quoted = [c for c in r.next_calls if str(c) in r.markdown]  # the rest are in the Next: hint, once
    v.text = for_people(r.markdown, quoted).splitlines()  # commands, not tool calls


def _list_runs(r: Any, v: View) -> None:
    if not r.runs and r.page > r.last_page and r.total:
        v.opening = [f"No runs on page {r.page:,}: the {_count(r.total, 'run')} of the {r.owner} end on page "
                     f"{r.last_page}."]
        v.hint(f"The last page: {r.next_calls[0]}.", r.next_calls[0])  # with the same team, limit and status
    elif not r.runs and not r.scan_complete:
        v.opening = [f"No runs shown on page {r.page}: the platform's paging misbehaves (see the note)."]
    elif not r.runs:
        v.opening = [f"No runs for the {r.owner}." if r.page == 1 else f"No runs on page {r.page}."]
        first = call("mf_list_examples")
        v.hint(f"Start one from an example: {first}.", first)
    else:
        paged = r.page > 1 or bool(r.next_page)
        active = sum(1 for run in r.runs if not run.terminal)  # counted on this page only: say so when paged
        v.opening = [f"{_count(r.total, 'run')} for the {r.owner}"
                     + (f", {active} active" + (" on this page" if paged else "") if active else "")
                     + (f" (page {r.page})" if paged else "") + "."]
        nxt = call("mf_get_run", run_id=r.runs[0].run_id)
        v.hint(f"Details of the newest{' on this page' if r.page > 1 else ''}: {nxt}.", nxt)
        if r.next_page:  # the next page, with the same team, limit and status
            v.hint(f"More: {r.next_calls[0]}.", r.next_calls[0])
    v.drop("owner", "total", "page", "next_page", "last_page", "scan_complete")
    table = v.table("runs")
    if table:
        table.columns, table.keep = ["run_id", "status", "latest_step", "max_steps", "created_at", "model", "name"], 2


def _check_progress(r: Any, v: View) -> None:
    step = f"step {r.latest_step if r.latest_step is not None else 0}/{r.max_steps or '?'}"
    learning = r.learning
    said = f", {learning.metric} {learning.last:.3g}" if learning and learning.metric and learning.last is not None \
        else ""
    said += f", {_LEARNING_WORDS.get(learning.verdict, learning.verdict)}" if learning else ""
    v.opening = [f"Run {r.run_id}: {r.verdict.replace('_', ' ')} ({r.status}, {step}{said})."]
    v.drop("run_id", "verdict", "status", "evidence", "terminal", "healthy", "latest_step", "max_steps",
           "percent_complete", "stall_threshold_seconds")
    if not r.recent_error_lines:
        v.drop("recent_error_lines")
    v.facts = [(k, val) for k, val in v.facts if not k.startswith(("failure_analysis.", "learning."))
               and k != "error_message"]
    servers = v.table("env_servers")
    if servers:
        servers.columns = ["env_name", "status", "pod_name"]
    v.lead = [f"- {e}" for e in r.evidence] + learning_lines(learning)


#: A learning verdict in words, after a metric's value.
_LEARNING_WORDS = {"learning": "learning", "flat": "flat (not learning)", "worsening": "worsening",
                   "saturated": "saturated (nothing to learn)", "overfitting": "overfitting",
                   "too_early": "too early to judge", "unknown": "learning unknown"}


def learning_lines(learning: Any) -> list[str]:
    """A learning verdict's lines for a person: the verdict, each finding (with what to do), what was not judged."""
    if learning is None:
        return []
    lines = [f"Learning: {_LEARNING_WORDS.get(learning.verdict, learning.verdict)}."]
    for f in learning.findings:
        lines.append(f"- {f.text}" + (f" What to do: {f.fix}" if f.fix else ""))
    if learning.unknown:
        lines.append(f"- Not judged (not logged): {', '.join(learning.unknown)}.")
    return lines


def _wait(r: Any, v: View) -> None:
    step = f", step {r.latest_step}/{r.max_steps or '?'}" if r.latest_step is not None else ""
    what = "reached" if r.reached else "not reached"
    v.opening = [f"Run {r.run_id}: {r.status}{step}; {r.until} {what} after {units.duration(r.waited_seconds)}."]


def _logs(r: Any, v: View) -> None:
    v.opening = [f"{_count(len(r.lines), 'line')} of the {r.component} logs of run {r.run_id}"
                 + (f" ({r.hidden_progress_lines} progress lines hidden)" if r.hidden_progress_lines else "") + "."]
    if not r.available and r.note:
        v.opening.append(r.note)
    elif r.note:  # which window a filtered read saw, and the command that widens it
        v.hint(r.note, *r.next_calls)
    v.facts, v.tables = [], []
    v.text = [" ".join(p for p in (line.timestamp, line.level, line.message) if p) + (
        f"\n{line.exception}" if line.exception else "") for line in r.lines]


def _checkpoints(r: Any, v: View) -> None:
    v.opening = [f"{_count(r.total, 'checkpoint')} of run {r.run_id}, {units.size(r.total_size_bytes)}"
                 + (f"; latest ready: step {r.latest_ready_step}" if r.latest_ready_step is not None else "") + "."]
    v.drop("run_id", "total")
    table = v.table("checkpoints")
    if table:
        table.columns, table.keep = ["step", "status", "size_bytes", "files", "path", "created_at"], 3
    if r.next_calls:
        v.hint(f"Download the latest READY one: {r.next_calls[0]}.", r.next_calls[0])


def _download_checkpoint(r: Any, v: View) -> None:
    only = f", {r.size_verified_only} by size only (no checksum on the volume)" if r.size_verified_only else ""
    v.opening = [f"Checkpoint step {r.step} of run {r.run_id}: {_count(r.files, 'file')}, {units.size(r.bytes)} "
                 f"in {r.dest}, verified ({r.md5_verified} by MD5{only}).", r.format]
    v.drop("run_id", "step", "dest", "files", "bytes", "format", "md5_verified", "size_verified_only")
    v.facts = [(k, val) for k, val in v.facts if val != 0]


def _volumes(r: Any, v: View) -> None:
    listing = r.listing
    v.facts = [(k, val) for k, val in v.facts if not k.startswith("listing.")]
    if listing is None:
        return
    under = (f"; {_count(listing.files, 'file')}, {units.size(listing.bytes)} under it"
             + ("" if listing.totals_complete else " (counted up to the first 20,000 files)")
             if listing.files is not None else "")
    v.opening = [f"{_count(len(listing.entries), 'item')} in {listing.volume}:/{listing.path}{under}."]
    v.tables = [Table("files", [dict(e) for e in listing.entries], ["name", "kind", "size_bytes", "modified"], 2)]
    v.tables[0].title = f"{listing.volume}:/{listing.path}"
    if listing.next_cursor:
        more = call("mf_list_volumes", team=r.owner.team_id or "personal", volume=listing.volume,
                    path=listing.path or None, cursor=listing.next_cursor)
        v.hint(f"Next page: {more}.", more)


def _list_traces(r: Any, v: View) -> None:
    v.opening = [f"{_count(r.count, r.kind.rstrip('s'))} of run {r.run_id} on this page."]
    if r.next_calls:  # the same arguments: a cursor is valid only with them
        v.hint(f"Next page: {r.next_calls[0]}.", r.next_calls[0])
    table = v.table("traces")
    if table:
        table.columns, table.keep = ["trace_id", "run_step", "reward", "outcome", "tokens", "size_bytes"], 2


def _download(r: Any, v: View) -> None:
    v.opening = [f"{_count(r.traces_downloaded, 'trace')} downloaded ({units.size(r.written_bytes)}) to "
                 f"{r.dest}; {r.traces_on_disk} on disk."]
    if r.missing.summary:
        v.opening.append(r.missing.summary)
    if r.note:
        v.opening.append(r.note)
    v.drop("run_id", "dest", "complete", "written_bytes", "traces_downloaded", "note")
    v.tables = [t for t in v.tables if t.name not in ("earlier_runs", "next_calls")]
    v.facts = [(k, val) for k, val in v.facts if val not in (0, False) or k == "traces_on_disk"]
    if r.complete:
        v.drop("expected_trace_count", "expected_episode_count")
    else:
        again = call("mf_download_traces", run_id=r.run_id, dest=r.dest)
        v.hint(f"Once the platform has uploaded the rest, the same command fetches what is missing: {again}.", again)
    if r.next_calls:  # the calls the note names (an earlier run's download, the eval runs)
        v.opening[-1] = for_people(v.opening[-1], r.next_calls)
    v.facts = [(k, val) for k, val in v.facts if not k.startswith("missing.")]
    steps = r.missing.steps_without_traces
    if steps:  # the numbers of the steps, not how many
        v.facts.append(("step_numbers_without_traces", steps))


def _summarize_logs(r: Any, v: View) -> None:
    errors = sum(s.error_lines for s in r.streams)
    back = f", {units.duration(r.looked_back_seconds)} back" if r.looked_back_seconds else ""
    whole = "the whole run" if r.covers_whole_run else "not the whole run (see caps)"
    v.opening = [f"Logs of run {r.run_id} ({r.status}): {_count(len(r.errors), 'distinct error')} in "
                 f"{_count(errors, 'error line')}, {_count(len(r.streams), 'component')}{back}; {whole}."]
    v.drop("run_id", "status", "looked_back_seconds", "looked_back_to", "covers_whole_run")
    v.lead = [f"- {cap}" for cap in r.caps]
    v.facts = [(k, val) for k, val in v.facts if k != "caps"]
    for name, columns in (("errors", ["component", "count", "first_seen", "last_seen", "pattern"]),
                          ("warnings", ["component", "count", "pattern"]), ("streams", ["component", "error_lines",
                                                                                       "warning_lines", "note"])):
        table = v.table(name)
        if table:
            table.columns, table.keep = columns, 2
    noisy = max(r.errors, key=lambda s: s.count, default=None)
    if noisy:
        component, _, env = noisy.component.partition("/")
        logs = call("mf_get_logs", run_id=r.run_id, component=component, env_name=env or None, level="ERROR",
                    since_seconds=r.looked_back_seconds)
        v.hint(f"The most frequent error's lines: {logs}.", logs)


def _export_logs(r: Any, v: View) -> None:
    state = "complete" if r.complete else "cut by the logs API's caps (see each file's cut)"
    v.opening = [f"{_count(r.lines_written, 'log line')} of run {r.run_id} in {_count(len(r.streams), 'file')} "
                 f"under {r.dest}: {state}."]
    v.drop("run_id", "dest", "lines_written", "complete")
    table = v.table("streams")
    if table:
        table.columns, table.keep = ["component", "file", "lines", "bytes", "complete", "cut"], 2


def _list_launches(r: Any, v: View) -> None:
    v.opening = [f"{_count(len(r.launches), 'plan')} of this platform in {r.store_path}." if r.launches else
                 f"No launches of this platform recorded in {r.store_path}."]
    v.drop("store_path")
    if r.store_warning:  # a store that cannot be written here, or an import from an old ledger, is said
        v.opening.append(r.store_warning)
        v.drop("store_warning")
    table = v.table("launches")
    if table:
        table.columns, table.keep = ["plan_id", "status", "run_id", "outcome", "action", "acted_on",
                                     "last_activity"], 2


def _compare_runs(r: Any, v: View) -> None:
    v.opening = [f"{_count(len(r.runs), 'run')} compared. {r.summary}"]
    v.drop("summary", "not_compared")
    v.lead = ["50% / 90%: steps until the run covered that share of its change; usd/plan: the platform's usage "
              "figure / the plan's expected cost."] + ([r.not_compared] if r.not_compared else [])
    runs = v.table("runs")
    if runs:  # short headers: the run id, the verdict, the milestones, the pace and the cost fit 80 columns
        runs.rows = [{"run_id": s.run_id, "verdict": s.verdict, "last": s.last, "50%": s.steps_to_50,
                      "90%": s.steps_to_90, "usd/plan": _cost(s.platform_usd, s.plan_expected_usd),
                      "steps/h": s.steps_per_hour, "best": s.best, "metric": s.metric, "name": s.name}
                     for s in r.runs]
        runs.columns, runs.keep = list(runs.rows[0]), 2
    diff = v.table("config_differences")
    if diff:
        diff.rows = [{"path": d.path, "values": " | ".join(x if x is not None else "(not set)" for x in d.values)}
                     for d in r.config_differences]
        diff.columns, diff.keep = ["path", "values"], 2


def _cost(spent: float | None, planned: float | None) -> str:
    """``$0.70/$1.50``: the platform's figure and the plan's expected cost (``-`` for one not known)."""
    if spent is None and planned is None:
        return ""
    return "/".join("-" if v is None else units.usd(v) for v in (spent, planned))


#: Tools whose result is a list (an empty one says so).
_LISTS = frozenset({"mf_list_models", "mf_list_gpus", "mf_list_volumes", "mf_list_teams"})

_VIEWS: dict[str, Callable[[Any, View], None]] = {
    "mf_summarize_logs": _summarize_logs,
    "mf_export_logs": _export_logs,
    "mf_list_launches": _list_launches,

    "mf_preflight": _preflight,
    "mf_list_examples": _list_examples,
    "mf_validate_config": _validate,
    "mf_prepare_config": _prepare,
    "mf_plan_run": _plan,
    "mf_dispatch_run": _dispatch,
    "mf_resume_run": _dispatch,
    "mf_get_run": _get_run,
    "mf_list_runs": _list_runs,
    "mf_check_progress": _check_progress,
    "mf_compare_runs": _compare_runs,
    "mf_wait_for_run": _wait,
    "mf_get_logs": _logs,
    "mf_list_checkpoints": _checkpoints,
    "mf_download_checkpoint": _download_checkpoint,
    "mf_list_volumes": _volumes,
    "mf_list_traces": _list_traces,
    "mf_download_traces": _download,
    "mf_run_report": _run_report,
}


class _Ascii:
    """A text stream that says its encoding is ASCII (rich's progress bar then uses ASCII only), and
    writes what it gets with anything else escaped (a run name, a message from the platform)."""

    encoding = "ascii"

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(text.encode("ascii", "backslashreplace").decode("ascii"))

    def __getattr__(self, name: str) -> Any:  # flush, fileno, isatty: the stream's own
        return getattr(self._stream, name)


class ProgressBar:
    """A ``progress(done, total, message)`` callback drawing a bar on stderr when stderr is a
    terminal (nothing when piped), in ASCII when the locale is not UTF-8 (``LANG=C``:
    :func:`skill.terminal.unicode_ok`); ``close()`` ends it and leaves no line behind."""

    def __init__(self) -> None:
        self._progress: Any = None
        self._task: Any = None
        if terminal.stderr().piped:
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        # rich then draws "-" bars; _Ascii is a text stream by duck typing
        stream = sys.stderr if terminal.unicode_ok(sys.stderr) else cast(TextIO, _Ascii(sys.stderr))
        self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                  TimeElapsedColumn(), console=Console(file=stream, highlight=False), transient=True)

    def __call__(self, done: float, total: float | None, message: str) -> None:
        if self._progress is None:
            return
        from rich.markup import escape

        if self._task is None:
            self._progress.start()
            self._task = self._progress.add_task(escape(message), total=total)
        self._progress.update(self._task, completed=done, total=total, description=escape(message))

    def close(self) -> None:
        """Stop drawing (the bar is transient: it leaves no line behind)."""
        if self._task is not None:
            self._progress.stop()
