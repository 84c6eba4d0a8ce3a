"""Page walks that always end: every cursor or page-number walk over the platform's lists goes
through here, so a host whose paging misbehaves cannot make a tool loop, and a walk cut short is
never reported as complete.

Two kinds of list (reference/prime-api.md): the traces host pages by cursor (``/traces``,
``/episodes``, ``/episodes/{id}/traces``, ``/runs``: ``{items, next_cursor}``, ``next_cursor``
``null`` on the last page, §6.2); the platform's ``/rft/runs`` by page number (``page``,
``limit``, ``total``, ``total_pages``, §5.2).

A cursor walk stops, and says why (:data:`End`), when the host answers:

- ``null``: the last page (``last_page``, the only complete end);
- ``""`` where it has more (``empty_cursor``: sent back, an empty cursor is a first page again);
- the cursor it was just sent (``repeated_cursor``) or any cursor sent earlier in the walk
  (``cycled_cursor``): following it would read pages already read, forever;
- or when the walk has read ``max_pages`` pages (``page_limit``; ``last_cursor`` continues it).

A page-number walk stops on a page whose rows were all on earlier pages (``repeated_page``), an
empty page before ``total`` rows were seen (``empty_page``), the last page, or ``max_pages``. A walk
an agent drives one page number at a time carries no memory: :func:`page_follows` judges page N by
page N-1 (read again), which catches a page served again (``repeated_page``) and, in a newest-first
list, pages that come round again (``out_of_order``: 1, 2, 1, 2 ...), whatever ``total`` claims.

:class:`CursorTrail` is the memory of a cursor walk (short digests of the cursors sent), small
enough to travel inside a tool's own cursor, so a walk an agent drives one call at a time ends
the same way (:mod:`tools.traces.listing`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

End = Literal["last_page", "empty_cursor", "repeated_cursor", "cycled_cursor", "page_limit", "repeated_page",
              "empty_page", "out_of_order"]

P = TypeVar("P")
T = TypeVar("T")

#: Digest characters kept per cursor (48 bits: a false "cycle" needs a collision among a walk's cursors).
DIGEST_CHARS = 12

_WHY: dict[str, str] = {
    "empty_cursor": "the host answered an empty cursor while it had more to give (sent back, an empty cursor is "
                    "the first page again)",
    "repeated_cursor": "the host answered the cursor it had just been sent: following it would read the same page "
                       "forever",
    "cycled_cursor": "the host answered a cursor it had given earlier in this walk: following it would read the "
                     "same pages in a circle",
    "page_limit": "the walk reached its bound of {max_pages} pages",
    "repeated_page": "the platform answered a page whose rows were all on earlier pages (its paging repeats)",
    "empty_page": "the platform answered an empty page although it counts {total} row(s) and fewer were seen",
    "out_of_order": "the platform answered a page holding rows newer than every row of the page before it (a "
                    "newest-first list whose pages come round again)",
}


def digest(cursor: str) -> str:
    """A short, stable digest of a cursor."""
    return hashlib.sha256(cursor.encode()).hexdigest()[:DIGEST_CHARS]


@dataclass
class Walk:
    """How a walk ended.

    Attributes:
        end: why it stopped (:data:`End`); ``None`` while walking or when the caller stopped it.
        pages: pages read.
        last_cursor: the cursor to continue from after ``page_limit``; the cursor the host
            answered otherwise (for the record: following it is what the walk refused).
        max_pages: the bound.
        total: rows the platform counts (page-number walks), when it says.
    """

    end: End | None = None
    pages: int = 0
    last_cursor: str | None = None
    max_pages: int = 0
    total: int | None = None

    @property
    def complete(self) -> bool:
        """True only when the host said this was the last page."""
        return self.end == "last_page"

    def note(self, what: str) -> str | None:
        """One sentence saying that and why the walk over ``what`` stopped short (``None`` when complete
        or still walking)."""
        if self.end is None or self.complete:
            return None
        why = _WHY[self.end].format(max_pages=self.max_pages, total=self.total)
        where = f" Last cursor: {self.last_cursor!r}." if self.last_cursor else ""
        return (f"The {what} stopped after {self.pages} page(s), possibly short: {why}. What was read is kept; "
                f"rows after it may be missing.{where}")


@dataclass
class CursorTrail:
    """The cursors a walk has sent (digests, oldest first) and the pages read; decides whether a next
    cursor may be followed. ``keep`` bounds the digests remembered (the oldest are forgotten: a cycle
    longer than that is still stopped by ``max_pages``)."""

    max_pages: int
    pages: int = 0
    sent: list[str] = field(default_factory=list)
    keep: int | None = None

    def step(self, sent: str | None, answered: str | None) -> End | None:
        """Record a page read with cursor ``sent`` whose ``next_cursor`` was ``answered``; return why
        the walk must stop, or ``None`` to follow ``answered``."""
        self.pages += 1
        if sent:  # a first page (no cursor) cannot be answered back
            self.sent.append(digest(sent))
        if self.keep is not None:
            del self.sent[:-self.keep]
        if answered is None:
            return "last_page"
        if answered == "":
            return "empty_cursor"
        if answered == sent:
            return "repeated_cursor"
        if digest(answered) in self.sent:
            return "cycled_cursor"
        if self.pages >= self.max_pages:
            return "page_limit"
        return None


class CursorWalk(Generic[P]):
    """Iterate the pages of a cursor list: ``fetch(cursor) -> page`` with ``.next_cursor``.

    ``walk`` says how it ended once the iteration is over (``walk.end`` stays ``None`` if the
    caller stopped early). Holds only the trail's digests, never the pages.
    """

    def __init__(self, fetch: Callable[[str | None], P], *, max_pages: int, cursor: str | None = None) -> None:
        self._fetch, self._cursor = fetch, cursor
        self.walk = Walk(max_pages=max_pages)
        self._trail = CursorTrail(max_pages=max_pages)

    def __iter__(self) -> Iterator[P]:
        cursor = self._cursor
        while True:
            page = self._fetch(cursor)
            answered = getattr(page, "next_cursor", None)
            end = self._trail.step(cursor, answered)
            self.walk.pages = self._trail.pages
            yield page
            if end is not None:
                self.walk.end, self.walk.last_cursor = end, answered
                return
            cursor = answered

    def items(self) -> Iterator[Any]:
        """Every item of every page (``page.items``), in order."""
        for page in self:
            yield from page.items  # type: ignore[attr-defined]


class NumberedWalk(Generic[T]):
    """Iterate the rows of a page-number list (``fetch(page_number) -> page``), each row once.

    ``rows(page)`` gives a page's rows, ``key(row)`` a row's identity, ``total(page)`` the rows
    the platform counts (``None``: it ignored paging and sent everything at once). Rows already
    seen are not yielded again. ``walk`` says how it ended.
    """

    def __init__(self, fetch: Callable[[int], Any], *, rows: Callable[[Any], Iterable[T]], key: Callable[[T], Hashable],
                 total: Callable[[Any], int | None], limit: int, max_pages: int, first: int = 1) -> None:
        self._fetch, self._rows, self._key, self._total = fetch, rows, key, total
        self._limit, self._first = limit, first
        self.walk = Walk(max_pages=max_pages)

    def __iter__(self) -> Iterator[T]:
        seen: set[Hashable] = set()
        number = self._first
        while True:
            page = self._fetch(number)
            rows = list(self._rows(page))
            total = self.walk.total = self._total(page)
            self.walk.pages += 1
            fresh = [r for r in rows if self._key(r) not in seen]
            seen.update(self._key(r) for r in fresh)
            yield from fresh
            if total is None or (rows and len(rows) < self._limit) or len(seen) >= total:
                end: End | None = "last_page"
            elif not rows:
                end = "empty_page"
            elif not fresh:
                end = "repeated_page"
            elif self.walk.pages >= self.walk.max_pages:
                end = "page_limit"
            else:
                end = None
            if end is not None:
                self.walk.end = end
                return
            number += 1


def why(end: End, *, max_pages: int = 0, total: int | None = None) -> str:
    """The reason a walk ended with ``end``, in words (``last_page`` has none: it is the honest end)."""
    return _WHY.get(end, "it ended").format(max_pages=max_pages, total=total)


def page_follows(previous: Sequence[T], rows: Sequence[T], *, key: Callable[[T], Hashable],
                 order: Callable[[T], Any] | None = None) -> End | None:
    """Whether ``rows`` (page N of a page-number list) can be the page after ``previous`` (page N-1,
    read just before): ``repeated_page`` when every row of ``rows`` is on ``previous``;
    ``out_of_order`` when the list is newest first (``order``: a row's sort value, newer is larger,
    ``None`` unknown) and a row of ``rows`` is newer than every row of ``previous``; ``None`` when it
    may follow (rows shifted by a new row in between still do). An empty side proves nothing."""
    if not rows or not previous:
        return None
    before = {key(r) for r in previous}
    if all(key(r) in before for r in rows):
        return "repeated_page"
    if order is not None:
        known_before = [v for v in map(order, previous) if v is not None]
        known_now = [v for v in map(order, rows) if v is not None]
        if known_before and known_now and max(known_now) > max(known_before):
            return "out_of_order"
    return None
