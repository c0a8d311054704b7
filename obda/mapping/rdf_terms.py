"""The RDF terms of the materialised dataset (:mod:`obda.mapping.materialise`): time graphs, natural literals, IRIs.

A stream row's triples go to the named graph of its timestamp (:func:`time_graph_iri`, read back by
:func:`graph_time`); an SQL value becomes its natural RDF literal (R2RML §10: :func:`natural_form`, XSD's canonical
forms of doubles and decimals); a template's value is percent-encoded where it is not ``iunreserved`` (R2RML §7.3:
:func:`iri_safe`).  Like the materialiser, independent of the unfolder: it shares only the model.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from decimal import Decimal, InvalidOperation
from typing import Any

from rdflib import Literal, URIRef
from rdflib.namespace import XSD

from obda.mapping.template_text import iso_text

TIME_GRAPH_PREFIX = "urn:obda:time:"


# --------------------------------------------------------------------------- time graphs


def _to_datetime(ts: Any) -> dt.datetime:
    if isinstance(ts, dt.datetime):
        return ts
    if isinstance(ts, dt.date):
        return dt.datetime(ts.year, ts.month, ts.day)
    if isinstance(ts, str):
        return dt.datetime.fromisoformat(ts.strip())
    if isinstance(ts, Literal):
        return _to_datetime(ts.toPython())
    raise ValueError(f"not a timestamp: {ts!r}")


def _iso(ts: dt.datetime) -> str:
    s = ts.isoformat()
    return s[:-6] + "Z" if s.endswith("+00:00") else s


def time_graph_iri(ts: Any) -> URIRef:
    """The named graph of the stream assertions at application time ``ts``.

    ``urn:obda:time:<ISO-8601>`` with a ``T`` separator, seconds always,
    microseconds only when non-zero, ``Z`` for UTC; naive timestamps stay
    naive.  Accepts datetimes, dates, ISO strings (``'2024-01-01 10:00:00'``).
    """
    return URIRef(TIME_GRAPH_PREFIX + _iso(_to_datetime(ts)))


def graph_time(iri: str) -> dt.datetime:
    """Inverse of :func:`time_graph_iri`; raises ValueError for other IRIs."""
    s = str(iri)
    if not s.startswith(TIME_GRAPH_PREFIX):
        raise ValueError(f"{s!r} is not a time graph IRI ({TIME_GRAPH_PREFIX}<timestamp>)")
    return dt.datetime.fromisoformat(s[len(TIME_GRAPH_PREFIX) :])


# --------------------------------------------------------------------------- natural RDF literals (R2RML §10)


def _kind_of_decl(decl: str | None) -> str | None:
    """The R2RML natural datatype class of a declared SQL type, or None if unknown."""
    if not decl:
        return None
    d = decl.upper()
    if "BOOL" in d:
        return "boolean"
    if "INT" in d:
        return "integer"
    if "DEC" in d or "NUMERIC" in d:
        return "decimal"
    if "REAL" in d or "FLOA" in d or "DOUB" in d:
        return "double"
    if "TIMESTAMP" in d or "DATETIME" in d:
        return "dateTime"
    if d.startswith("DATE"):
        return "date"
    if d.startswith("TIME"):
        return "time"
    if "BINARY" in d or "BLOB" in d or "BYTEA" in d:
        return "hexBinary"
    if "CHAR" in d or "TEXT" in d or "CLOB" in d or "STRING" in d or "UUID" in d:
        return "string"
    return None


def _kind_of_value(v: Any) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "double"
    if isinstance(v, Decimal):
        return "decimal"
    if isinstance(v, dt.datetime):
        return "dateTime"
    if isinstance(v, dt.date):
        return "date"
    if isinstance(v, dt.time):
        return "time"
    if isinstance(v, (bytes, bytearray, memoryview)):
        return "hexBinary"
    return "string"


def canonical_double(v: float) -> str:
    """XSD canonical lexical form of a double: ``8.025E1``, ``3.0E1``, ``0.0E0``."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "INF" if v > 0 else "-INF"
    if v == 0:
        return "-0.0E0" if math.copysign(1, v) < 0 else "0.0E0"
    sign, digits, exponent = Decimal(repr(v)).normalize().as_tuple()
    ds = "".join(map(str, digits))
    e = len(ds) - 1 + exponent
    mant = ds[0] + "." + (ds[1:] or "0")
    return ("-" if sign else "") + f"{mant}E{e}"


def canonical_decimal(v: Decimal) -> str:
    """XSD 1.0 canonical decimal: a point with at least one digit either side, no extra zeros."""
    s = format(v.normalize(), "f")
    if "." not in s:
        s += ".0"
    if s.startswith("-0.") and Decimal(s) == 0:
        s = s[1:]
    return s


def _bool(v: Any) -> bool | None:
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)):
        return bool(v)
    if isinstance(v, str) and v.strip().lower() in ("true", "false", "1", "0", "t", "f"):
        return v.strip().lower() in ("true", "1", "t")
    return None


def natural_form(v: Any, decl: str | None) -> tuple[str, str | None]:
    """(lexical form, XSD datatype IRI or None for a plain string) of a SQL value.

    The declared SQL type decides (R2RML §10.2); SQLite stores values loosely, so
    a value that does not fit its declared type falls back to its own Python type.
    """
    kind = _kind_of_decl(decl) or _kind_of_value(v)
    try:
        if kind == "boolean":
            b = _bool(v)
            if b is not None:
                return ("true" if b else "false"), str(XSD.boolean)
        elif kind == "integer":
            if isinstance(v, bool):
                return str(int(v)), str(XSD.integer)
            if isinstance(v, int) or (isinstance(v, str) and re.fullmatch(r"\s*[+-]?\d+\s*", v)):
                return str(int(v)), str(XSD.integer)
            if isinstance(v, float) and v.is_integer():
                return str(int(v)), str(XSD.integer)
            if isinstance(v, Decimal) and v == v.to_integral_value():
                return str(int(v)), str(XSD.integer)
        elif kind == "double":
            if isinstance(v, (int, float, Decimal)) and not isinstance(v, bool):
                return canonical_double(float(v)), str(XSD.double)
            if isinstance(v, str):
                return canonical_double(float(v)), str(XSD.double)
        elif kind == "decimal":
            if isinstance(v, (int, float, Decimal, str)) and not isinstance(v, bool):
                return canonical_decimal(Decimal(str(v))), str(XSD.decimal)
        elif kind == "dateTime":
            d = _to_datetime(v)
            if d.tzinfo is None:  # the canonical form: fractional seconds without trailing zeros (as the SQL)
                return iso_text(d), str(XSD.dateTime)
            s = d.isoformat()
            return (s[:-6] + "Z" if s.endswith("+00:00") else s), str(XSD.dateTime)
        elif kind == "date":
            if isinstance(v, dt.datetime):
                return v.date().isoformat(), str(XSD.date)
            if isinstance(v, dt.date):
                return v.isoformat(), str(XSD.date)
            return dt.date.fromisoformat(str(v).strip()).isoformat(), str(XSD.date)
        elif kind == "time":
            t = v if isinstance(v, dt.time) else dt.time.fromisoformat(str(v).strip())
            return t.isoformat(), str(XSD.time)
        elif kind == "hexBinary":
            if isinstance(v, (bytes, bytearray, memoryview)):
                return bytes(v).hex().upper(), str(XSD.hexBinary)
    except (ValueError, InvalidOperation, TypeError):
        pass
    # a string, or a value that does not fit the declared type: its own natural form
    own = _kind_of_value(v)
    if own != "string" and own != kind:
        return natural_form(v, None)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).hex().upper(), str(XSD.hexBinary)
    return str(v), None


# --------------------------------------------------------------------------- IRIs


_IUNRESERVED = re.compile(
    "[A-Za-z0-9\\-._~\u00a0-\ud7ff\uf900-\ufdcf\ufdf0-\uffef"
    "\U00010000-\U0001fffd\U00020000-\U0002fffd\U00030000-\U0003fffd\U00040000-\U0004fffd"
    "\U00050000-\U0005fffd\U00060000-\U0006fffd\U00070000-\U0007fffd\U00080000-\U0008fffd"
    "\U00090000-\U0009fffd\U000a0000-\U000afffd\U000b0000-\U000bfffd\U000c0000-\U000cfffd"
    "\U000d0000-\U000dfffd\U000e1000-\U000efffd]"
)


def iri_safe(s: str) -> str:
    """R2RML §7.3: percent-encode every character that is not ``iunreserved`` (UTF-8 bytes)."""
    return "".join(ch if _IUNRESERVED.fullmatch(ch) else "".join(f"%{b:02X}" for b in ch.encode("utf-8")) for ch in s)


SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")
_BAD_IRI_CHARS = re.compile(r'[\x00-\x20<>"{}|\\^`\x7f]')


def is_valid_iri(s: str) -> bool:
    return bool(SCHEME.match(s)) and not _BAD_IRI_CHARS.search(s)
