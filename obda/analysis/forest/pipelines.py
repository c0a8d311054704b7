"""Rule 7 — pipelines: the per-row work on every alias (run in Spark, or by the local backend).

A pipeline filters the alias's rows by its own conditions (plus constant
conditions implied through equality joins, so that rows that can never join
are dropped before they are counted) and keeps the attributes any cross
comparison or the projection reads.
"""

from __future__ import annotations

from dataclasses import replace

from obda.analysis.forest.draft import Draft
from obda.analysis.forest.members import infer_local_conditions
from obda.analysis.forest.model import Attr, Pipeline


def row_pipelines(d: Draft) -> Draft:
    m = d.member
    inferred = infer_local_conditions(m)
    pipelines: dict[str, Pipeline] = {}
    pid = d.first_pipeline_id
    for alias, table in m.aliases:
        needed: set[Attr] = set()
        for p in d.value_preds:
            needed |= {a for a in p.attrs if a[0] == alias}
        needed |= {a for a in d.out_attrs if a[0] == alias}
        needed |= {a for a in d.kept if a[0] == alias}
        attrs = tuple(sorted(needed))
        exprs = tuple((a, e) for a, e in m.exprs if a in needed)
        filters = m.local_of(alias) + inferred.get(alias, ())
        pipelines[alias] = Pipeline(pid, m.index, alias, table, filters, attrs, exprs)
        pid += 1
    return replace(d, pipelines=pipelines)
