"""Query catalogs: named SPARQL queries with their expected verdicts.

Catalog file (YAML), a list of entries::

    - name: hot_turbines
      description: turbines with a temperature reading above 90
      query: |                 # inline SPARQL, or
        SELECT ...
      file: queries/q.rq       # a file relative to the catalog
      constraints:             # optional: k-constraints for this entry, added to the sources file's
        - name: alarm_near_reading          # (same syntax: obda/model/constraints.py)
          referential: {from: alarm, to: measurement, on: [sensor_id]}
          after: PT5M
          before: PT5M
      expect:
        verdict: bounded       # bounded | unbounded | not_shown (the plain verdict)
        constrained: bounded   # optional: the verdict under the declared k-constraints
        why: ...               # free text, for readers

``check_catalog`` compiles and analyses each query and compares the verdicts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence
from xml.sax.saxutils import escape, quoteattr

import yaml

from obda.errors import Location, ObdaError

VERDICTS = ("bounded", "unbounded", "not_shown")


class CatalogError(ObdaError):
    code = "catalog_error"


@dataclass(frozen=True)
class CatalogEntry:
    name: str
    query: str
    expected: str | None
    description: str = ""
    why: str = ""
    location: Location = Location()
    constraints: object = None  # the entry's 'constraints:' YAML node (checked against the project's sources)
    expected_constrained: str | None = None
    problem: "CatalogError | None" = None  # why the entry cannot be checked (reported as its error)


@dataclass(frozen=True)
class CatalogResult:
    name: str
    expected: str | None
    verdict: str | None
    members: int | None
    seconds: float
    error: str | None = None
    error_code: str | None = None
    expected_constrained: str | None = None
    constrained: str | None = None  # the verdict under the declared k-constraints

    @property
    def ok(self) -> bool:
        return self.error is None and (self.expected is None or self.expected == self.verdict) and (
            self.expected_constrained is None or self.expected_constrained == self.constrained)

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "ok": self.ok,
            "expected": self.expected,
            "verdict": self.verdict,
            "members": self.members,
            "seconds": round(self.seconds, 4),
            "error": self.error,
            "error_code": self.error_code,
            **({"expected_constrained": self.expected_constrained, "constrained": self.constrained}
               if self.expected_constrained is not None or self.constrained != self.verdict else {}),
        }


def _nodes_of_names(text: str) -> dict[str, yaml.MappingNode]:
    out: dict[str, yaml.MappingNode] = {}
    try:
        node = yaml.compose(text)
    except yaml.YAMLError:
        return out
    if isinstance(node, yaml.MappingNode):  # {queries: [...]}
        node = next((v for k, v in node.value if k.value == "queries"), None)
    if isinstance(node, yaml.SequenceNode):
        for item in node.value:
            if isinstance(item, yaml.MappingNode):
                for k, v in item.value:
                    if k.value == "name":
                        out[str(v.value)] = item
    return out


def load_catalog(path: str | Path) -> list[CatalogEntry]:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise CatalogError(f"cannot read catalog: {e.strerror}", Location(str(p))) from e
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise CatalogError(
            f"catalog is not valid YAML: {getattr(e, 'problem', e)}",
            Location(str(p), mark.line + 1, mark.column + 1) if mark else Location(str(p)),
        ) from e
    if isinstance(raw, dict) and "queries" in raw:
        raw = raw["queries"]
    if not isinstance(raw, list):
        raise CatalogError("a catalog is a YAML list of {name, query, expect}", Location(str(p), 1))
    nodes = _nodes_of_names(text)
    entries: list[CatalogEntry] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        name = str(item["name"]) if isinstance(item, dict) and "name" in item else f"entry {i + 1}"
        node = nodes.get(name)
        loc = Location(str(p), node.start_mark.line + 1 if node is not None else None)
        try:
            entries.append(_entry(p, item, i, name, node, loc, seen))
        except CatalogError as e:  # this entry is reported as an error; the others are still checked
            entries.append(CatalogEntry(name, "", None, location=e.location, problem=e))
    return entries


def _entry(p: Path, item, i: int, name: str, node, loc: Location, seen: set) -> CatalogEntry:
    if not isinstance(item, dict) or "name" not in item:
        raise CatalogError(f"entry {i + 1} has no 'name'", Location(str(p)))
    if name in seen:
        raise CatalogError(f"query name {name!r} is used twice", loc)
    seen.add(name)
    if "query" in item:
        qtext = str(item["query"])
    elif "file" in item:
        qp = p.parent / str(item["file"])
        try:
            qtext = qp.read_text(encoding="utf-8")
        except OSError as e:
            raise CatalogError(f"query {name!r}: cannot read {qp}: {e.strerror}", loc) from e
    else:
        raise CatalogError(f"query {name!r} has neither 'query' nor 'file'", loc)
    expect = item.get("expect") or {}
    verdict = expect.get("verdict") if isinstance(expect, dict) else None
    if verdict is not None and verdict not in VERDICTS:
        raise CatalogError(f"query {name!r}: expect.verdict must be one of {', '.join(VERDICTS)}", loc)
    constrained = expect.get("constrained") if isinstance(expect, dict) else None
    if constrained is not None and constrained not in VERDICTS:
        raise CatalogError(f"query {name!r}: expect.constrained must be one of {', '.join(VERDICTS)}", loc)
    if verdict is None and constrained is None:
        raise CatalogError(f"query {name!r} has no expect.verdict: a check needs the verdict you expect "
                           f"(one of {', '.join(VERDICTS)})", loc)
    cnode = next((v for k, v in node.value if k.value == "constraints"), None) if node is not None else None
    return CatalogEntry(name, qtext, verdict, str(item.get("description", "")),
                        str(expect.get("why", "")) if isinstance(expect, dict) else "", loc, cnode, constrained)


def check_entry(project, entry: CatalogEntry) -> CatalogResult:
    from obda.analysis import analyze_query

    from obda.model.sources_file import parse_constraints

    t0 = time.perf_counter()
    if entry.problem is not None:
        return CatalogResult(entry.name, entry.expected, None, None, 0.0, str(entry.problem), entry.problem.code)
    try:
        sources = project.sources
        if entry.constraints is not None:
            sources = sources.with_constraints(parse_constraints(entry.constraints, sources, entry.location.file))
        comp = project.compile(entry.query, file=f"{entry.location.file}#{entry.name}")
        report = analyze_query(comp, sources)
    except ObdaError as e:
        return CatalogResult(entry.name, entry.expected, None, None, time.perf_counter() - t0, str(e), e.code,
                             entry.expected_constrained)
    verdict = report.verdict.value if hasattr(report.verdict, "value") else str(report.verdict)
    constrained = getattr(report, "constrained_verdict", verdict)
    return CatalogResult(entry.name, entry.expected, verdict, len(comp.members), time.perf_counter() - t0,
                         expected_constrained=entry.expected_constrained, constrained=constrained)


def check_catalog(project, entries: Sequence[CatalogEntry]) -> Iterator[CatalogResult]:
    for e in entries:
        yield check_entry(project, e)


def render_junit(results: Sequence[CatalogResult], name: str = "catalog") -> str:
    failures = sum(1 for r in results if not r.ok and r.error is None)
    errors = sum(1 for r in results if r.error is not None)
    total = sum(r.seconds for r in results)
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f"<testsuites><testsuite name={quoteattr(name)} tests=\"{len(results)}\" failures=\"{failures}\" "
        f"errors=\"{errors}\" time=\"{total:.3f}\">",
    ]
    for r in results:
        out.append(f"  <testcase classname={quoteattr(name)} name={quoteattr(r.name)} time=\"{r.seconds:.3f}\">")
        if r.error is not None:
            out.append(f"    <error type={quoteattr(r.error_code or 'error')} message={quoteattr(r.error)}/>")
        elif not r.ok:
            msg = (f"expected verdict {r.expected}, got {r.verdict}" if r.expected not in (None, r.verdict) else
                   f"expected verdict under the k-constraints {r.expected_constrained}, got {r.constrained}")
            out.append(f"    <failure message={quoteattr(msg)}>{escape(msg)}</failure>")
        out.append("  </testcase>")
    out.append("</testsuite></testsuites>")
    return "\n".join(out) + "\n"
