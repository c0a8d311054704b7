"""SQL text for each dialect obda prints: sqlglot's generator, plus what a dialect spells differently.

sqlglot writes ``ts + INTERVAL '300' SECOND`` for every dialect; SQLite has no interval type, so its
output would not run.  There a comparison with a shifted time (an interval join's bound, a window's
``CURRENT_TIMESTAMP - INTERVAL …``) compares Julian day numbers instead:
``julianday(m.ts) <= julianday(e.ts, '+300 seconds')``, which also compares timestamps written in
different textual forms (``2024-01-01T00:05:00Z`` and ``2024-01-01 00:05:00``) correctly; so does a comparison
with a dateTime constant (``?t >= "2024-01-01T01:00:00"^^xsd:dateTime``), whatever form the column's text has.
SQLite has no ``EXTRACT`` either (SPARQL's ``HOURS(?t)`` …): it reads the field from ``strftime``.
An answer variable named like an SQLite keyword (``?when``) is quoted there.
SQLite before 3.44 has no ordered aggregate, and none takes DISTINCT with a separator: SPARQL's
``GROUP_CONCAT``, in obda's order, is refused in that dialect (printed for the others).
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect

from obda.errors import Location, UnsupportedConstructError
from obda.model.query import replacement_parts

#: SPARQL's comparison operator -> its sqlglot class (the one table of it: mapping, analysis and execution use it)
COMPARISON_CLASSES = {"=": exp.EQ, "!=": exp.NEQ, "<": exp.LT, "<=": exp.LTE, ">": exp.GT, ">=": exp.GTE}
_COMPARISONS = tuple(COMPARISON_CLASSES.values())
_SECONDS = {"MICROSECOND": 1e-6, "MILLISECOND": 1e-3, "SECOND": 1, "MINUTE": 60, "HOUR": 3600, "DAY": 86400}


def sql_text(tree: exp.Expression, dialect: str, pretty: bool = False, location: Location | None = None) -> str:
    """``tree`` as ``dialect``'s SQL text (the tree itself is not changed); ``location``: the query's, for the error
    of a construct the dialect cannot spell.

    A member that projects nothing (the pattern of ``SELECT (COUNT(*) AS ?n)``, which counts its solutions)
    selects the constant ``1 AS one``: SQL has no empty select list."""
    if any(not s.expressions for s in tree.find_all(exp.Select)):
        tree = tree.copy()
        for s in tree.find_all(exp.Select):
            if not s.expressions:
                s.select(exp.alias_(exp.Literal.number(1), "one"), copy=False)
    if dialect == "sqlite" and any(_shifted(e) or _timestamp_constant(e) for c in tree.find_all(*_COMPARISONS)
                                   for e in (c.this, c.expression)):
        tree = tree.copy().transform(_sqlite_comparison)
    if dialect == "sqlite" and tree.find(exp.Extract) is not None:
        tree = tree.copy().transform(_sqlite_extract)
    if dialect == "sqlite" and any(_sqlite_keyword(i) for i in tree.find_all(exp.Identifier)):
        tree = tree.copy().transform(lambda n: exp.to_identifier(n.name, quoted=True) if _sqlite_keyword(n) else n)
    if dialect == "sqlite" and tree.find(exp.GroupConcat) is not None:
        raise UnsupportedConstructError(
            "GROUP_CONCAT in SQLite", "GROUP_CONCAT's SQL orders the strings it joins (obda's order, the same in "
            "every engine), and SQLite has no ordered aggregate before 3.44, nor a DISTINCT one with a separator; "
            "print the SQL for spark, duckdb or postgres", location)
    if tree.find(exp.RegexpReplace) is not None:
        if dialect == "sqlite":
            raise UnsupportedConstructError(
                "REPLACE in SQLite", "SQLite has no regular-expression replacement for SPARQL's REPLACE; print the SQL "
                "for spark, duckdb or postgres", location)
        if dialect in ("duckdb", "postgres"):
            tree = tree.copy().transform(_backslash_groups)
    return tree.sql(dialect=dialect, pretty=pretty)


def _backslash_groups(node: exp.Expression) -> exp.Expression:
    """REPLACE's replacement, kept in XPath's syntax (``$1``, ``\\$``, ``\\\\``: Spark's, which is Java's), in the
    syntax of DuckDB (RE2) and PostgreSQL: ``\\1`` a group, ``\\\\`` a backslash, ``$`` itself."""
    if not isinstance(node, exp.RegexpReplace):
        return node
    parts = replacement_parts(node.args["replacement"].this)
    text = "".join(p.replace("\\", "\\\\") if isinstance(p, str) else f"\\{p}" for p in parts or ())
    node = node.copy()
    node.set("replacement", exp.Literal.string(text))
    return node


def _sqlite_keyword(node: exp.Expression) -> bool:
    """An unquoted name SQLite reads as a keyword (an answer variable ``?when``, ``?order``): quoted there (sqlglot
    quotes DuckDB's reserved words itself, not SQLite's)."""
    return isinstance(node, exp.Identifier) and not node.quoted and node.name.upper() in _SQLITE_KEYWORDS


# every word of sqlglot's SQLite keywords (``ORDER BY``: ORDER); quoting more than needed is harmless there, where a
# quoted name matches as an unquoted one does, case-insensitively
_SQLITE_KEYWORDS = frozenset(w for k in Dialect.get_or_raise("sqlite").tokenizer_class.KEYWORDS for w in k.split()
                             if w.isalpha())


# SQLite has no EXTRACT: a field of a timestamp is a number read from its strftime text (%f: seconds with fraction)
_STRFTIME = {"YEAR": ("%Y", "INTEGER"), "MONTH": ("%m", "INTEGER"), "DAY": ("%d", "INTEGER"),
             "HOUR": ("%H", "INTEGER"), "MINUTE": ("%M", "INTEGER"), "SECOND": ("%f", "REAL")}


def _sqlite_extract(node: exp.Expression) -> exp.Expression:
    if isinstance(node, exp.Extract) and node.this.name.upper() in _STRFTIME:
        fmt, to = _STRFTIME[node.this.name.upper()]
        text = exp.Anonymous(this="strftime", expressions=[exp.Literal.string(fmt), node.expression.copy()])
        return exp.Cast(this=text, to=exp.DataType.build(to))
    return node


def _shifted(e: exp.Expression) -> bool:
    return isinstance(e, (exp.Add, exp.Sub)) and isinstance(e.expression, exp.Interval)


def _timestamp_constant(e: exp.Expression) -> bool:
    return isinstance(e, exp.Cast) and e.to.is_type(exp.DataType.Type.TIMESTAMP) and isinstance(e.this, exp.Literal)


def _sqlite_comparison(node: exp.Expression) -> exp.Expression:
    sides = (node.this, node.expression) if isinstance(node, _COMPARISONS) else ()
    if any(_shifted(e) or _timestamp_constant(e) for e in sides):
        return type(node)(this=_julian(node.this), expression=_julian(node.expression))
    return node


def _julian(e: exp.Expression) -> exp.Expression:
    """``julianday(e)``, and ``e ± INTERVAL 'n' unit`` as ``julianday(e, '±s seconds')``."""
    if not _shifted(e):
        return exp.Anonymous(this="julianday", expressions=[e.copy()])
    interval = e.expression
    unit = interval.unit.name.upper() if interval.unit is not None else "SECOND"
    seconds = float(interval.this.name) * _SECONDS.get(unit.rstrip("S"), 1)
    sign = "-" if isinstance(e, exp.Sub) else "+"
    amount = f"{seconds:.6f}".rstrip("0").rstrip(".")
    return exp.Anonymous(this="julianday", expressions=[e.this.copy(), exp.Literal.string(f"{sign}{amount} seconds")])
