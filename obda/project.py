"""A project folder: ontology files, R2RML mapping files and a sources file.

``Project.load(directory)`` reads and checks everything at once and returns an
immutable :class:`Project`; on any error it raises and nothing is half-loaded.
``project.compile(sparql)`` runs the front half of the pipeline: parse →
rewrite (TBox) → unfold (mappings) and returns a typed :class:`Compilation`.

Project file ``project.yaml`` (all keys optional)::

    name: turbine-demo
    ontology: [../ontologies/turbine.ttl]      # files, relative to the folder
    mappings: [../mappings/turbine.r2rml.ttl]
    sources: sources.yaml
    profile: strict                            # strict | lenient (OWL 2 QL check)
    data: data                                 # where generated data goes

Without ``project.yaml`` (or for keys it omits) the defaults are: every
``*.ttl|*.owl|*.rdf|*.owx|*.nt`` under ``ontology/`` or ``ontologies/``, every
``*.ttl`` under ``mappings/``, and ``sources.yaml``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Sequence

import yaml

from obda.errors import Location, ObdaError, Problem, QuerySyntaxError, SourcesError, UnknownTermError, ValidationError
from obda.model.compilation import Compilation
from obda.model.mapping import Mapping
from obda.model.ontology import Ontology
from obda.model.query import RDF_TYPE, ClassAtom, PropertyAtom, Query
from obda.model.terms import type_column
from obda.model.sources import Sources
from obda.model.sources_file import load_sources

PROJECT_FILE = "project.yaml"
ONTOLOGY_SUFFIXES = (".ttl", ".owl", ".rdf", ".owx", ".nt", ".xml")
_KEYS = ("name", "ontology", "mappings", "sources", "profile", "data", "description")


class ProjectError(ObdaError):
    """The project folder or its project.yaml is malformed."""

    code = "project_error"


@dataclass(frozen=True)
class ProjectSettings:
    """What ``project.yaml`` says, with defaults resolved to absolute paths."""

    directory: Path
    name: str
    ontology_files: tuple[Path, ...]
    mapping_files: tuple[Path, ...]
    sources_file: Path
    profile: str = "strict"
    data_dir: Path | None = None

    @staticmethod
    def read(directory: str | Path) -> "ProjectSettings":
        d = Path(directory).resolve()
        if not d.is_dir():
            raise ProjectError(f"project folder {str(directory)!r} does not exist or is not a folder", Location(str(directory)))
        pf = d / PROJECT_FILE
        raw: dict = {}
        if pf.exists():
            try:
                raw = yaml.safe_load(pf.read_text(encoding="utf-8")) or {}
            except yaml.YAMLError as e:
                mark = getattr(e, "problem_mark", None)
                loc = Location(str(pf), mark.line + 1, mark.column + 1) if mark else Location(str(pf))
                raise ProjectError(f"project file is not valid YAML: {getattr(e, 'problem', e)}", loc) from e
            if not isinstance(raw, dict):
                raise ProjectError("project file must be a mapping of keys", Location(str(pf), 1))
            for k in raw:
                if k not in _KEYS:
                    raise ProjectError(
                        f"unknown key {k!r} in project file (allowed: {', '.join(_KEYS)})", Location(str(pf), _line_of(pf, k))
                    )

        def files(key: str, default_dirs: tuple[str, ...], suffixes: tuple[str, ...]) -> tuple[Path, ...]:
            if key in raw:
                val = raw[key]
                items = [val] if isinstance(val, str) else list(val or [])
                out = []
                for it in items:
                    p = (d / str(it)).resolve()
                    if not p.exists():
                        raise ProjectError(f"{key}: file {it!r} does not exist", Location(str(pf), _line_of(pf, key)))
                    if p.is_dir():
                        out.extend(sorted(q for q in p.iterdir() if q.suffix.lower() in suffixes))
                    else:
                        out.append(p)
                return tuple(out)
            for dd in default_dirs:
                if (d / dd).is_dir():
                    return tuple(sorted(q for q in (d / dd).iterdir() if q.suffix.lower() in suffixes))
            return ()

        ontology_files = files("ontology", ("ontology", "ontologies"), ONTOLOGY_SUFFIXES)
        mapping_files = files("mappings", ("mappings", "mapping"), (".ttl",))
        sources_file = (d / str(raw.get("sources", "sources.yaml"))).resolve()
        profile = str(raw.get("profile", "strict"))
        if profile not in ("strict", "lenient"):
            raise ProjectError(f"profile must be 'strict' or 'lenient', not {profile!r}", Location(str(pf), _line_of(pf, "profile")))
        data_dir = (d / str(raw["data"])).resolve() if "data" in raw else None
        return ProjectSettings(d, str(raw.get("name", d.name)), ontology_files, mapping_files, sources_file, profile, data_dir)


def _line_of(path: Path, key: str) -> int | None:
    try:
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.match(rf"\s*{re.escape(key)}\s*:", line):
                return i
    except OSError:
        return None
    return None


@dataclass(frozen=True)
class Project:
    """A loaded, validated project: ontology, mappings, sources."""

    settings: ProjectSettings
    ontology: Ontology
    mapping: Mapping
    sources: Sources
    warnings: tuple[Problem, ...] = field(default=())

    @property
    def directory(self) -> Path:
        return self.settings.directory

    @property
    def name(self) -> str:
        return self.settings.name

    @staticmethod
    def load(directory: str | Path, *, profile: str | None = None) -> "Project":
        """Read and validate a project folder; raises on the first stage that fails.

        Validation problems of the mappings are all collected and raised
        together as one :class:`ValidationError`.
        """
        from obda.mapping import load_mapping, validate_mapping
        from obda.ontology import load_ontology

        settings = ProjectSettings.read(directory)
        if profile:
            settings = replace(settings, profile=profile)
        if not settings.sources_file.exists():
            raise SourcesError("sources file not found", Location(str(settings.sources_file)))
        sources = load_sources(settings.sources_file)
        ontology = load_ontology(list(settings.ontology_files), mode=settings.profile)
        mapping = load_mapping(list(settings.mapping_files))
        problems = validate_mapping(mapping, ontology, sources)
        errors = [p for p in problems if p.severity == "error"]
        if errors:
            raise ValidationError(errors)
        warnings = tuple(p for p in problems if p.severity != "error") + tuple(
            Problem("owl2ql_profile", f"ignored axiom {f.axiom}: {f.reason}", f.location, "warning")
            for f in ontology.findings
        )
        return Project(settings, ontology, mapping, sources, warnings)

    @staticmethod
    def from_files(
        ontology: Sequence[str | Path],
        mappings: Sequence[str | Path],
        sources: Sources | str | Path,
        *,
        profile: str = "strict",
        name: str = "project",
        validate: bool = True,
    ) -> "Project":
        """Assemble a project from explicit files (no project folder needed).

        ``sources`` is a :class:`Sources` (e.g. from ``obda.mapping.ddl.sources_from_ddl``)
        or the path of a sources file. With ``validate=False`` mapping problems
        are kept as warnings instead of raising (for exploring third-party mappings).
        """
        from obda.mapping import load_mapping, validate_mapping
        from obda.ontology import load_ontology

        if not isinstance(sources, Sources):
            sources = load_sources(sources)
        onto = load_ontology([str(p) for p in ontology], mode=profile)
        mapping = load_mapping([str(p) for p in mappings])
        problems = validate_mapping(mapping, onto, sources)
        if validate and any(p.severity == "error" for p in problems):
            raise ValidationError([p for p in problems if p.severity == "error"])
        settings = ProjectSettings(
            Path.cwd(), name, tuple(Path(p) for p in ontology), tuple(Path(p) for p in mappings),
            Path(sources.file) if sources.file else Path("<sources>"), profile,
        )
        warnings = tuple(replace(p, severity="warning") for p in problems)
        return Project(settings, onto, mapping, sources, warnings)

    def parse(self, sparql: str, *, file: str | None = None) -> Query:
        """Parse a SPARQL query and check that it only uses terms of the ontology."""
        from obda.query import parse_query

        query = parse_query(sparql, file=file, vocabulary=self.ontology)
        check_query_terms(query, self.ontology, sparql, file)
        return query

    def compile(self, sparql: str, *, file: str | None = None, max_members: int | None = None) -> Compilation:
        """SPARQL text → parsed query → rewritten UCQ → unfolded SQL (with provenance).  ``max_members``: the
        unfolding's member budget (default :data:`obda.mapping.unfold.MAX_MEMBERS`)."""
        from obda.mapping import unfold
        from obda.rewrite import rewrite

        budget = {} if max_members is None else {"max_members": max_members}
        query = self.parse(sparql, file=file)
        rewritten = rewrite(query, self.ontology)
        unfolding = unfold(query, rewritten, self.mapping, self.sources, self.ontology, **budget)
        members, sql, removed, views = unfolding[:4]
        characteristic, typed = None, ()
        one_row = query.ask and not query.time_variables  # an ASK over static data (of an aggregate subquery too)
        if query.aggregation is not None:  # the unfolded pattern is the characteristic query, grouped
            from obda.mapping.aggregate import aggregate_select

            characteristic = grouped = sql
            if query.window is not None:  # the SQL filters on the window's time: the pattern projecting it (once:
                # GROUP BY ?t projects it already)
                extra = () if query.window.variable in query.projection else (query.window.variable,)
                timed = replace(query, projection=query.projection + extra, aggregation=None, window=None)
                grouped = unfold(timed, rewrite(timed, self.ontology), self.mapping, self.sources, self.ontology,
                                 **budget)[1]
            sql = aggregate_select(query.aggregation, grouped, query.window, query.order_by, query.limit, query.offset)
        elif not one_row:  # a column of several kinds of term: its term type beside it (obda.model.terms)
            from obda.mapping.aggregate import ordered_table, typed_union

            names = tuple(v.name for v in query.projection)
            sql, typed = typed_union(sql, [m.terms for m in members], names)
            if query.order_by or query.limit is not None or query.offset:  # static data only: ordered, cut
                shown = query.columns + tuple(type_column(c) for c in typed if c in query.columns)
                sql = ordered_table(sql, query.order_by, query.limit, query.offset,
                                    shown if query.order_keys else None, typed)
        if one_row:  # its table: one row, true or false
            from obda.mapping.aggregate import ask_table

            sql = ask_table(sql, query.columns[0])
        return Compilation(
            query=query,
            rewritten=tuple(r.cq for r in rewritten),
            members=tuple(members),
            sql=sql,
            removed=tuple(removed),
            views=views,
            characteristic=characteristic,
            checks=_checks(unfolding),
            typed=typed,
        )

    def compile_file(self, path: str | Path, max_members: int | None = None) -> Compilation:
        from obda.model.sources_file import read_utf8

        p = Path(path)
        text = read_utf8(p, "query file", QuerySyntaxError)  # not UTF-8: located at the bad byte, not a traceback
        return self.compile(text, file=str(p), max_members=max_members)

    def resolve(self, relative: str | None) -> Path | None:
        """Resolve a path from the sources file (relative to the project folder)."""
        if relative is None:
            return None
        p = Path(relative)
        return p if p.is_absolute() else (self.settings.directory / p)


def _checks(unfolding) -> tuple[Compilation, ...]:
    """The compilations of an unfolding's check patterns (each with its own checks)."""
    return tuple(Compilation(query=q, rewritten=(), members=u.members, sql=u.sql, removed=u.removed, views=u.views,
                             checks=_checks(u)) for q, u in unfolding.checks)


def check_query_terms(query: Query, ontology: Ontology, text: str, file: str | None) -> None:
    """Reject query atoms whose class or property the ontology does not declare."""
    for cq in query.branches:
        for atom in cq.atoms:
            if isinstance(atom, ClassAtom):
                if not ontology.is_class(atom.cls):
                    kind = "a property" if ontology.knows(atom.cls) else "not declared in the ontology"
                    raise UnknownTermError(
                        f"class <{atom.cls}> is {kind}", _locate_term(text, atom.cls, file)
                    )
            elif isinstance(atom, PropertyAtom):
                if atom.prop == RDF_TYPE:
                    continue
                if not (ontology.is_object_property(atom.prop) or ontology.is_data_property(atom.prop)):
                    kind = "a class, used as a property" if ontology.is_class(atom.prop) else "not declared in the ontology"
                    raise UnknownTermError(
                        f"property <{atom.prop}> is {kind}", _locate_term(text, atom.prop, file)
                    )


def _locate_term(text: str, iri: str, file: str | None) -> Location:
    """Best-effort position of an IRI (full or by local name) in the query text."""
    local = re.split(r"[#/]", iri)[-1]
    for needle in (f"<{iri}>", f":{local}"):
        idx = text.find(needle)
        if idx >= 0:
            if needle.startswith(":"):
                # step back over the prefix name
                while idx > 0 and (text[idx - 1].isalnum() or text[idx - 1] in "_-"):
                    idx -= 1
            line = text.count("\n", 0, idx) + 1
            col = idx - (text.rfind("\n", 0, idx) + 1) + 1
            return Location(file, line, col)
    return Location(file)


def validate_project(directory: str | Path, *, profile: str | None = None) -> list[Problem]:
    """Check a project folder and return every problem found (errors and warnings).

    Unlike :meth:`Project.load`, this does not stop at the first failing stage
    when it can go on: ontology, sources and mappings are each checked, and
    mapping validation runs against whatever loaded.
    """
    from obda.errors import ValidationError as _VE
    from obda.mapping import load_mapping, validate_mapping
    from obda.ontology import load_ontology

    def as_problem(e: ObdaError) -> list[Problem]:
        if isinstance(e, _VE):
            return list(e.problems)
        return [Problem(e.code, e.message, e.location, "error")]

    problems: list[Problem] = []
    try:
        settings = ProjectSettings.read(directory)
    except ObdaError as e:
        return as_problem(e)
    if profile:
        settings = replace(settings, profile=profile)
    sources = ontology = mapping = None
    if not settings.sources_file.exists():
        problems.append(Problem("sources_error", "sources file not found", Location(str(settings.sources_file))))
    else:
        try:
            sources = load_sources(settings.sources_file)
        except ObdaError as e:
            problems += as_problem(e)
    try:
        ontology = load_ontology(list(settings.ontology_files), mode=settings.profile)
        problems += [
            Problem("owl2ql_profile", f"ignored axiom {f.axiom}: {f.reason}", f.location, "warning")
            for f in ontology.findings
        ]
        problems += [
            Problem("undeclared_term", f"{kind} <{iri}> is used in an axiom but declared nowhere (a typo? declare "
                    f"it, e.g. with a owl:{'Class' if kind == 'class' else 'ObjectProperty'})", where, "warning")
            for kind, iri, where in ontology.undeclared
        ]
    except ObdaError as e:
        problems += as_problem(e)
    try:
        mapping = load_mapping(list(settings.mapping_files))
    except ObdaError as e:
        problems += as_problem(e)
    if mapping is not None and sources is not None:
        problems += validate_mapping(mapping, ontology, sources)
    if sources is not None:
        problems += _missing_locations(sources, settings.directory)
    return problems


def _missing_locations(sources: Sources, base: Path) -> list[Problem]:
    """A warning per table whose files' location does not exist (a stream would read nothing until it does; a
    static table cannot be loaded): located at the table in the sources file."""
    from obda.model.sources import missing_locations

    out = []
    for t, p in missing_locations(sources.tables, base):
        if p is None:
            out.append(Problem("location_missing", f"stream {t.name!r} has no 'location': nothing would be read",
                               t.source_location, "warning"))
            continue
        what = "nothing would be read until it exists" if t.is_stream else "the table cannot be loaded"
        out.append(Problem("location_missing", f"{'stream' if t.is_stream else 'static table'} {t.name!r}: its "
                           f"location {t.location!r} ({p}) does not exist: {what} (create it, fix 'location', or "
                           "write data with obda generate)", t.source_location, "warning"))
    return out
