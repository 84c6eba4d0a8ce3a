"""Units as types, and the one way each is written for people.

A result field holding an amount is annotated with its unit: :data:`USD`, :data:`USDPerHour`,
:data:`USDPerGPUHour`, :data:`Seconds`, :data:`Bytes` (``Annotated`` types: the value is a plain
number on the wire and in ``--json``). The unit reaches the JSON Schema an agent sees as
``"x-unit"`` on the number (also inside ``X | None``), and the field name ends in the unit
(:data:`SUFFIXES`: ``*_usd``, ``*_usd_per_hour``, ``*_usd_per_gpu_hour``, ``*_seconds``, ``*_bytes``;
a test holds names and types together).

Each unit has one formatter (:func:`usd`, :func:`usd_per_hour`, :func:`usd_per_gpu_hour`,
:func:`duration`, :func:`size`) used by everything that writes an amount for a person or an
agent: the terminal rendering (``skill/render.py``, through :func:`text_for_field`), plan
summaries, spend, reports. Money is always ``$1,234.56`` (a rate ``$1.80/GPU-hour``, ``$3.60/h``); a
duration ``45 s``, ``3 min 20 s``, ``2 h 5 min``; a size ``1.5 GB``. ``None`` reads ``unknown``.

Imports nothing from ``tools``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

__all__ = [
    "SUFFIXES",
    "USD",
    "Bytes",
    "Seconds",
    "USDPerGPUHour",
    "USDPerHour",
    "Unit",
    "WholeSeconds",
    "duration",
    "size",
    "text_for_field",
    "unit_of_field",
    "usd",
    "usd_per_gpu_hour",
    "usd_per_hour",
]

UNKNOWN = "unknown"


def usd(value: float | None) -> str:
    """An amount of US dollars: ``$0.60``, ``$1,234.56``; ``unknown`` for None."""
    return UNKNOWN if value is None else f"${value:,.2f}"


def usd_per_hour(value: float | None) -> str:
    """US dollars per hour of a run: ``$3.60/h``."""
    return UNKNOWN if value is None else f"{usd(value)}/h"


def usd_per_gpu_hour(value: float | None) -> str:
    """US dollars per GPU-hour: ``$1.80/GPU-hour``."""
    return UNKNOWN if value is None else f"{usd(value)}/GPU-hour"


def duration(seconds: float | None) -> str:
    """Seconds as a person says them: ``45 s``, ``3 min 20 s``, ``2 h 5 min`` (``1,234 h`` for long
    ones); ``unknown`` for None."""
    if seconds is None:
        return UNKNOWN
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min" + (f" {s % 60} s" if s % 60 else "")
    return f"{s // 3600:,} h" + (f" {s % 3600 // 60} min" if s % 3600 // 60 else "")


def size(n_bytes: float | None) -> str:
    """Bytes in decimal units: ``512 B``, ``1.5 MB``, ``120 GB``; ``unknown`` for None."""
    if n_bytes is None:
        return UNKNOWN
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n_bytes) >= scale:
            value = n_bytes / scale
            return f"{value:.1f} {unit}" if value < 100 else f"{value:.0f} {unit}"
    return f"{int(n_bytes)} B"


@dataclass(frozen=True)
class Unit:
    """A unit: its symbol in the JSON Schema (``x-unit``), the field-name suffix and the formatter."""

    symbol: str
    suffix: str
    formatter: Callable[[Any], str]

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        json_schema = handler(schema)
        json_schema["x-unit"] = self.symbol
        return json_schema


_USD = Unit("USD", "usd", usd)
_USD_PER_HOUR = Unit("USD/h", "usd_per_hour", usd_per_hour)
_USD_PER_GPU_HOUR = Unit("USD/GPU-hour", "usd_per_gpu_hour", usd_per_gpu_hour)
_SECONDS = Unit("s", "seconds", duration)
_BYTES = Unit("bytes", "bytes", size)

#: US dollars.
USD = Annotated[float, _USD]
#: US dollars per hour of a run (a price per GPU-hour times its GPUs).
USDPerHour = Annotated[float, _USD_PER_HOUR]
#: US dollars per GPU-hour (the platform's ``pricePerGpuHour``).
USDPerGPUHour = Annotated[float, _USD_PER_GPU_HOUR]
#: Seconds (durations, ages, timeouts).
Seconds = Annotated[float, _SECONDS]
#: Whole seconds (an integer on the wire: a window, a time to live).
WholeSeconds = Annotated[int, _SECONDS]
#: Bytes.
Bytes = Annotated[int, _BYTES]

#: The units by field-name suffix, longest first (``_usd_per_gpu_hour`` before ``_usd``).
SUFFIXES: tuple[Unit, ...] = (_USD_PER_GPU_HOUR, _USD_PER_HOUR, _USD, _SECONDS, _BYTES)


#: Names of the plan's cost estimate that still put the unit first (``usd_low``, ``usd_high``,
#: ``seconds_per_step_low``): they change with the plan's one typed record.
_LEGACY_PREFIXES = (("usd_", _USD), ("seconds_per_step_", _SECONDS))


def unit_of_field(name: str) -> Unit | None:
    """The unit a field name says (its suffix, or the whole name: ``bytes``, ``usd_per_gpu_hour``)."""
    unit = next((u for u in SUFFIXES if name == u.suffix or name.endswith("_" + u.suffix)), None)
    if unit is None:
        unit = next((u for prefix, u in _LEGACY_PREFIXES if name.startswith(prefix)), None)
    return unit


def text_for_field(name: str, value: float | None) -> str | None:
    """``value`` written in the unit ``name`` says, or None when the name says no unit."""
    unit = unit_of_field(name)
    return None if unit is None else unit.formatter(value)
