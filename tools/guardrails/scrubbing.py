"""Scrubbing: known secret values hidden from everything a tool shows or records.

* **Scrubbing.** :class:`Scrubber` replaces every known secret value with
  ``[REDACTED:NAME]`` in text, dicts/lists and pydantic models; the ``@tool`` wrapper runs
  it on every result and the state store on every record.

Which names, values and shapes are secret is decided by :mod:`tools.guardrails.secret_detection`;
this module uses it, never the reverse. Local and pure (no HTTP).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from tools.guardrails.secret_detection import (
    KEY_FORMATS,
    KEYED_HEX,
    LAUNCH_KEY,
    MIN_SECRET_LENGTH,
    EnvFileError,
    assigned_secrets,
    credential_tokens,
    is_secret_env_name,
    parse_env_file,
    raw_env_values,
    secret_texts,
)

if TYPE_CHECKING:
    from tools.core import Context

#: The scrubber's memo of short strings: entries at most, and characters per string at most.
MEMO_ENTRIES, MEMO_CHARS = 4096, 256
#: Values :meth:`Scrubber.scrub_obj` passes on as they are (bytes: raw trace documents are never rewritten).
_SCALARS = (bool, int, float, bytes)
#: Every known key format, in one pass (:meth:`Scrubber.scrub_text` redacts them by shape).
_ANY_FORMAT = re.compile("|".join(f"(?P<f{i}>{pattern.pattern})" for i, (_, pattern) in enumerate(KEY_FORMATS)))
M = TypeVar("M", bound=BaseModel)


class Scrubber:
    """Replaces every known secret value with ``[REDACTED:NAME]``.

    Holds (name, value) pairs; values shorter than :data:`MIN_SECRET_LENGTH` are ignored
    (they would redact ordinary words). A value known under two names keeps the first.
    Matching is by value, so a secret is hidden wherever it appears: inside a URL, a log
    line, a dict key. Values shaped like a known key format are redacted too, known or not
    (see :meth:`scrub_text`). Overlapping occurrences are merged so no fragment of a secret is
    left visible. Cost: one C-level substring scan per value and two compiled regex passes per
    string (nothing quadratic); short strings already scrubbed are answered from a bounded
    memo (:data:`MEMO_ENTRIES` strings of at most :data:`MEMO_CHARS` characters, emptied when a
    value is added), since pages of a listing repeat the same ids, names and models.
    """

    def __init__(self, pairs: Iterable[tuple[str, str]] = ()) -> None:
        self._names: dict[str, str] = {}  # value -> name
        self._ordered: list[tuple[str, str]] = []  # (value, name), longest first
        self._memo: dict[str, str] = {}  # short text -> scrubbed text, for the values held now
        for name, value in pairs:
            self.add(name, value)

    @classmethod
    def from_context(cls, ctx: Context) -> Scrubber:
        """Collect the secrets a context can reach: ``PRIME_API_KEY`` (environment, and the
        key of the prime config file / active context, skipped if settings cannot be
        resolved), and every variable of ``ctx.env`` whose name contains KEY, TOKEN, SECRET,
        PASSWORD, PASSWD or CREDENTIAL or ends in ``_PAT`` (except ``*_PATH``/``*_FILE``/
        ``*_DIR``, which hold paths), and every value of the env files that plans in the
        context's state store forward from (their ``env_files`` fact), so a later session
        also hides a key that reached a run from a file. Add other env files with
        :meth:`add_env_file`."""
        scrubber = cls()
        scrubber.add(LAUNCH_KEY, ctx.env.get(LAUNCH_KEY) or "")
        try:
            scrubber.add(LAUNCH_KEY, _plain(ctx.settings.api_key))
            if ctx.env.get(LAUNCH_KEY):  # the env key hides the file's key in settings: read it too
                from tools.platform.settings import resolve_settings

                file_env = {k: v for k, v in ctx.env.items() if k != LAUNCH_KEY}
                scrubber.add(LAUNCH_KEY, _plain(resolve_settings(env=file_env, home=ctx.home).api_key))
        except Exception:  # noqa: BLE001 - a broken config file must not break scrubbing
            pass
        for name, value in ctx.env.items():
            if is_secret_env_name(name):
                scrubber.add(name, value)
        for path in _recorded_env_files(ctx):
            scrubber.add_env_file(path, ctx.env)
        return scrubber

    def add(self, name: str, value: str | None) -> None:
        """Remember ``value`` under ``name`` (ignored when shorter than 8 characters)."""
        if not isinstance(value, str) or len(value) < MIN_SECRET_LENGTH or value in self._names:
            return
        self._names[value] = name
        self._ordered = sorted(self._names.items(), key=lambda item: -len(item[0]))
        self._memo = {}
        stripped = value.strip()
        if stripped != value:
            self.add(name, stripped)

    def add_env_file(self, path: str | Path, env: Mapping[str, str] | None = None) -> None:
        """Remember every value in an env file (all of them are treated as secrets). Values
        whose ``${VAR}`` cannot be expanded are remembered unexpanded; a missing file is
        ignored (the caller reports it)."""
        try:
            parsed = parse_env_file(path, env or {})
            items: Iterable[tuple[str, str]] = parsed.values.items()
        except EnvFileError:
            try:
                items = raw_env_values(Path(path))
            except EnvFileError:
                return
        for name, value in items:
            self.add(name, value)

    def known_values(self) -> list[str]:
        """The values held (for :func:`find_secret_values`'s ``known_values``). Never output these."""
        return [value for value, _ in self._ordered]

    def __len__(self) -> int:
        return len(self._ordered)

    def scrub_text(self, text: str) -> str:
        """``text`` with each occurrence of a known value replaced by ``[REDACTED:NAME]``, and
        each value shaped like a known key format (:data:`KEY_FORMATS`, or a 40-hex key right
        after "api key"/"token"/...) replaced by ``[REDACTED:<format>]`` even when its value
        is not known here (a key forwarded from another shell showing up in a run's log), and each
        value assigned to a secret-named variable (``AWS_SECRET_ACCESS_KEY=...``, ``"password": "..."``:
        :func:`~tools.guardrails.secret_detection.assigned_secrets`) as ``[REDACTED:<variable>]``."""
        if not text or len(text) > MEMO_CHARS:
            return self._scrub(text)
        memo = self._memo
        out = memo.get(text)
        if out is None:
            out = self._scrub(text)
            if len(memo) >= MEMO_ENTRIES:
                memo.clear()
            memo[text] = out
        return text if out == text else out  # unchanged text comes back as the same object

    def _scrub(self, text: str) -> str:
        if not text:
            return text
        spans: list[tuple[int, int, str]] = []
        if len(text) >= 16:
            for match in _ANY_FORMAT.finditer(text):
                group = match.lastgroup or "f0"  # every alternative is a named group f<i>
                spans.append((match.start(), match.end(), KEY_FORMATS[int(group[1:])][0]))
            for match in KEYED_HEX.finditer(text):
                spans.append((match.start(1), match.end(1), "40-hex key"))
        for value, name in self._ordered:
            start = text.find(value)
            while start != -1:
                spans.append((start, start + len(value), name))
                start = text.find(value, start + 1)
        if len(text) >= 16:  # after the known values: a known value keeps its own name
            for name, start, end in assigned_secrets(text):  # AWS_SECRET_ACCESS_KEY=..., "password": "..."
                spans.append((start, end, name))
        if not spans:
            return text
        spans.sort(key=lambda s: (s[0], -s[1]))
        out: list[str] = []
        pos = 0
        cur_start, cur_end, cur_name = spans[0]
        for start, end, name in spans[1:]:
            if start < cur_end:  # overlaps: extend the current redaction
                cur_end = max(cur_end, end)
                continue
            out += [text[pos:cur_start], f"[REDACTED:{cur_name}]"]
            pos, (cur_start, cur_end, cur_name) = cur_end, (start, end, name)
        out += [text[pos:cur_start], f"[REDACTED:{cur_name}]", text[cur_end:]]
        return "".join(out)

    def scrub_obj(self, obj: Any) -> Any:
        """Scrub strings inside dicts (keys and values), lists, tuples, sets and pydantic
        models; other values are returned as they are. Unchanged containers are returned
        as the same object."""
        if isinstance(obj, str):
            return self.scrub_text(obj)
        if obj is None or isinstance(obj, _SCALARS):  # the common case inside models: nothing to scrub
            return obj
        if isinstance(obj, BaseModel):
            return self.scrub_model(obj)
        if isinstance(obj, dict):
            new = {self.scrub_obj(k): self.scrub_obj(v) for k, v in obj.items()}
            same = len(new) == len(obj) and all(
                k in obj and obj[k] is v for k, v in new.items()
            )
            return obj if same else new
        if isinstance(obj, (list, tuple, set, frozenset)):
            items = [self.scrub_obj(v) for v in obj]
            if all(a is b for a, b in zip(items, obj, strict=True)):
                return obj
            return type(obj)(items)
        return obj

    def scrub_model(self, model: M) -> M:
        """A model of the same type with every string field (nested models, lists, dicts,
        extra fields included) scrubbed. Built with ``model_copy(update=...)`` so it never
        fails validation on a redacted value; returns ``model`` itself when nothing changed."""
        update: dict[str, Any] = {}
        for name, value in model.__dict__.items():  # the fields' values (extra fields are below)
            new = self.scrub_obj(value)
            if new is not value:
                update[name] = new
        for name, value in (model.model_extra or {}).items():
            new = self.scrub_obj(value)
            new_name = self.scrub_text(name)
            if new is not value or new_name != name:
                update[new_name] = new
        if not update:
            return model
        copy = model.model_copy(update=update)
        if copy.model_extra:
            for name in [n for n in copy.model_extra if self.scrub_text(n) != n]:
                del copy.model_extra[name]
        return copy


def _recorded_env_files(ctx: Context) -> list[str]:
    """The env files named by the plans of the context's state store (none when there is no store
    or it cannot be read)."""
    from tools.guardrails.store import Store

    return Store.recorded_env_files(ctx.state_path())


def _plain(key: Any) -> str:
    """The text of a ``SecretStr`` (or plain string / None)."""
    return key.get_secret_value() if hasattr(key, "get_secret_value") else str(key or "")


def argument_scrubber(obj: Any) -> Scrubber:
    """A :class:`Scrubber` hiding every token of the strings in ``obj`` (tool arguments) shaped like a
    credential without a known prefix (:func:`~tools.guardrails.secret_detection.credential_tokens`):
    an error quoting an argument (a run id, a GPU type, a config path) never shows one."""
    tokens: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, BaseModel):
            value = value.model_dump()
        if isinstance(value, str):
            tokens.extend(credential_tokens(value))
        elif isinstance(value, Mapping):
            for v in value.values():
                walk(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v)

    walk(obj)
    return Scrubber(("credential-shaped argument", token) for token in tokens)


def secret_scrubber(obj: Any, *, known_values: Iterable[str] = (), check_key_names: bool = False) -> Scrubber:
    """A :class:`Scrubber` that hides every string :func:`scan_for_secrets` flags in ``obj`` (for
    a result that reports facts read from the same input, e.g. a config's W&B project holding a
    key: the finding names the location, and the fact must not show the value either)."""
    texts = secret_texts(obj, known_values=known_values, check_key_names=check_key_names)
    return Scrubber(("secret-looking value", text) for text in texts)
