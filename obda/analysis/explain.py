"""Explanations users can act on: plain words, a witness scenario, a hint, provenance.

For every violated condition: what fails in plain words, which stream
contents force unbounded memory (a witness scenario in the style of Arasu
Examples 5.8, 5.9, 5.12), what to change, and — when the SQL came from a
compiled SPARQL query — which ontology atoms and triples maps produced the
streams involved (``MemberOrigin``).
"""

from __future__ import annotations

from obda.analysis.criteria import Violation
from obda.analysis.preprocess import ModifiedQuery


def _tables(mq: ModifiedQuery, stream: str) -> str:
    try:
        s = mq.stream(stream)
    except StopIteration:
        return stream
    return "/".join(dict.fromkeys(s.tables))


def _name(mq: ModifiedQuery, stream: str) -> str:
    t = _tables(mq, stream)
    return stream if t.lower() == stream.lower() else f"{stream} (table {t})"


def _others(mq: ModifiedQuery, stream: str) -> list[str]:
    return [s for s in mq.infinite if s != stream]


def _ts(mq: ModifiedQuery, stream: str) -> str:
    try:
        return mq.stream(stream).timestamps[0]
    except (StopIteration, IndexError):
        return f"τ({stream})"


def _outputs(mq: ModifiedQuery, attr: str) -> str:
    """Output columns (answer variables) built from an attribute, e.g. ``sensor``."""
    names = [p.name for p in mq.member.projection if any(str(a) == attr for a in p.attrs)]
    return ", ".join(names)


def plain(mq: ModifiedQuery, v: Violation) -> str:
    """The violation in plain words."""
    if v.kind == "trees":
        return (f"The timestamp comparisons do not arrange {', '.join(map(lambda s: _name(mq, s), v.streams))} in a tree: "
                f"{v.message.split(': ', 1)[-1]}. With duplicates kept, the number of results depends on the exact "
                "interleaving of their tuples in time.")
    if v.kind == "locality":
        return (f"The join {v.detail.get('atom', ' / '.join(v.attributes))} connects streams that are neither siblings "
                f"nor parent and child in the timestamp order ({v.message.split(': ', 1)[-1]}).")
    if v.kind == "projection" and v.detail.get("time"):
        outs = _outputs(mq, v.attributes[0]) or v.attributes[0]
        return (f"The output column {outs} holds the timestamp of {_name(mq, v.streams[0])}, which is not the latest "
                "stream of the answer: every past timestamp of it may still be output by a later tuple, so all must "
                "be kept" + (" (and, with duplicates removed, remembered)." if mq.distinct else "."))
    if v.kind == "projection":
        s = v.streams[0]
        d = v.detail.get("depth")
        outs = _outputs(mq, v.attributes[0])
        col = f"{outs} ({v.attributes[0]})" if outs and outs != v.attributes[0].split(".")[-1] else v.attributes[0]
        if d is not None and d > 1:
            return (f"The output column {col} comes from {_name(mq, s)}, which is {d} steps below the latest "
                    "stream in the timestamp order; its values must be kept until every later stream has a matching tuple.")
        return (f"The output column {col} of {_name(mq, s)} can take unboundedly many values "
                + ("and duplicates are removed, so every value already output must be remembered."
                   if mq.distinct else "and it must be kept until the tuples it joins with arrive."))
    if v.kind == "equality":
        return (f"The equality join {' = '.join(v.attributes)} between {', '.join(_name(mq, s) for s in v.streams)} is on "
                "attributes with unboundedly many values: each value seen so far may meet a future tuple.")
    if v.kind == "inequality":
        s = v.streams[0]
        if mq.distinct:
            return (f"{_name(mq, s)} takes part in inequality joins on two independent unbounded attributes "
                    f"({', '.join(v.attributes)}); a single extreme value per key no longer summarises its tuples.")
        return (f"{_name(mq, s)} takes part in a non-redundant inequality join on unbounded attributes "
                f"({', '.join(v.attributes)}); with duplicates kept, every value is needed to count future matches.")
    return v.message


def witness(mq: ModifiedQuery, v: Violation) -> str:
    """Stream contents that force unbounded memory."""
    g = mq.graph
    if v.kind == "trees":
        multi = v.detail.get("multi_parent") or []
        if multi:
            u = multi[0]
            ps = g.parents(u)
            return (f"{u} receives tuples at times 1..N, then {ps[0]} and {ps[1]} receive tuples at interleaved later times; "
                    f"each new {ps[0]} tuple joins the {u} tuples earlier than it and each {ps[1]} tuple those earlier than it, "
                    f"so the arrival time of every {u} tuple must be kept to count results.")
        roots = v.detail.get("roots") or []
        return (f"{' and '.join(roots)} both receive tuples later than the rest of the tree; which earlier tuples each of "
                "them joins depends on its own arrival time, so the full history of the shared descendants must be kept.")
    if v.kind == "locality":
        a, b = (v.attributes + ("?", "?"))[:2]
        si, sj = v.streams
        return (f"{sj} keeps receiving tuples with distinct {b} values; a later {si} tuple joins only those matching {a} "
                f"among the tuples that arrived in the right order relative to the streams in between, so all must be kept.")
    if v.kind == "projection" and v.detail.get("time"):
        s = v.streams[0]
        later = ", ".join(p for p in (g.parents(s) if s in g.nodes else ())) or " or ".join(_others(mq, s)) or "matching"
        return (f"{s} receives tuples at the timestamps 1..N, each matching; a later {later} tuple then outputs all N "
                "timestamps, so every one of them must be kept.")
    if v.kind == "projection":
        s = v.streams[0]
        x = v.attributes[0]
        others = _others(mq, s)
        if mq.distinct:
            return (f"{s} keeps receiving tuples with distinct {x} values at increasing times; every distinct value is a "
                    "new output row and duplicate elimination must remember all of them.")
        later = [p for p in (g.parents(s) if s in g.nodes else ())] or others
        return (f"{s} keeps receiving tuples with distinct {x} values at increasing times; each may be output when a future "
                f"{' or '.join(later) or 'matching'} tuple arrives, so all must be kept.")
    if v.kind == "equality":
        s, t = (list(v.streams) + ["?", "?"])[:2]
        a, b = (list(v.attributes) + ["?", "?"])[:2]
        return (f"{s} keeps receiving tuples with distinct {a} values at increasing times; each may join a future {t} "
                f"tuple with {b} equal to it, so all must be kept.")
    if v.kind == "inequality":
        s = v.streams[0]
        joins = v.detail.get("joins") or []
        j = joins[0] if joins else ", ".join(v.attributes)
        if mq.distinct:
            return (f"{s} receives tuples whose values on {', '.join(v.attributes)} move in opposite directions "
                    f"(as in Arasu Example 5.12); for each of them a future tuple exists that joins only it ({'; '.join(joins[:2])}), "
                    "so all must be kept.")
        return (f"{s} receives tuples with ever larger (or smaller) values on {', '.join(v.attributes)}; a future tuple "
                f"joins exactly those satisfying {j}, and to output the right number of copies the whole "
                "distribution of values must be kept (Arasu Example 5.9).")
    return ""


def hint(mq: ModifiedQuery, v: Violation) -> str:
    """What to change to make the member bounded."""
    g = mq.graph
    if v.kind == "trees":
        multi = v.detail.get("multi_parent") or []
        if multi:
            u = multi[0]
            ps = g.parents(u)
            return (f"order the events in time: compare the timestamps of {ps[0]} and {ps[1]} "
                    f"(e.g. {_ts(mq, ps[1])} < {_ts(mq, ps[0])}), so that {u} has a single parent; "
                    "or use DISTINCT if duplicates do not matter.")
        roots = v.detail.get("roots") or []
        return (f"order the latest streams in time ({' vs '.join(_ts(mq, r) for r in roots)}) so one of them is the latest; "
                "or use DISTINCT if duplicates do not matter.")
    if v.kind == "locality":
        si, sj = v.streams
        return (f"relate the timestamps of {si} and {sj} directly (e.g. {_ts(mq, sj)} < {_ts(mq, si)}), or drop the join "
                f"{v.detail.get('atom', '')}.")
    if v.kind == "projection" and v.detail.get("time"):
        return (f"project the time of the latest stream instead of {v.attributes[0]} (an answer keyed by its own "
                f"timestamp costs no memory), or drop {v.attributes[0]} from the output, or bound {_ts(mq, v.streams[0])} "
                "by a constant (a finite stream).")
    if v.kind == "projection":
        x = v.attributes[0]
        s = v.streams[0]
        d = v.detail.get("depth")
        if d is not None and d > 1:
            return (f"project an attribute of the latest stream or of its direct predecessors instead of {x}, or compare "
                    f"{_ts(mq, s)} with the latest stream's timestamp directly; or use DISTINCT.")
        tip = f"bound {x} (e.g. {x} BETWEEN 0 AND 100, or {x} = a constant or a static column), or drop it from the projection"
        if not mq.distinct and g.has_edges:
            tip += f"; or make {s} the latest stream (its attributes may then be unbounded)"
        return tip + "."
    if v.kind == "equality":
        a = v.attributes[0] if v.attributes else "the join attribute"
        return (f"bound the join attribute (e.g. {a} BETWEEN 0 AND 100, or equate it with a static column), or join on a "
                "bounded attribute instead.")
    if v.kind == "inequality":
        base = "bound one side of the inequality by constants (e.g. add a BETWEEN)"
        if not mq.distinct:
            return base + "; or use DISTINCT (then one extreme value per key suffices, Arasu Example 5.11)."
        return base + ", or drop one of the two inequality joins."
    return ""


def provenance(mq: ModifiedQuery, streams) -> list[dict]:
    """Ontology atoms and triples maps that produced the given streams (from ``MemberOrigin``)."""
    origin = mq.member.origin
    if origin is None:
        return []
    tables = dict(origin.alias_tables)
    out = []
    for s in streams:
        try:
            aliases = mq.stream(s).aliases
        except StopIteration:
            aliases = (s,)
        for alias in aliases:
            for src in origin.aliases_for(alias):
                out.append({
                    "stream": s, "alias": alias, "table": tables.get(alias, _tables(mq, s)),
                    "atom": str(src.atom), "triples_map": src.triples_map,
                    "file": src.mapping_file, "line": src.mapping_line,
                })
    return out


def provenance_text(items: list[dict]) -> str:
    if not items:
        return ""
    parts = []
    for p in items:
        where = f" ({p['file']}:{p['line']})" if p.get("file") and p.get("line") else (f" ({p['file']})" if p.get("file") else "")
        parts.append(f"{p['stream']} = table {p['table']} from atom {p['atom']} via triples map <{p['triples_map']}>{where}")
    return "; ".join(parts)
