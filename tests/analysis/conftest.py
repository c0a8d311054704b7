"""Shared catalogs and a checker fixture running both the polynomial and the naive checker."""

from __future__ import annotations

import pytest

from obda.analysis import analyze
from obda.analysis.criteria import check_polynomial
from obda.analysis.naive import check_naive
from obda.analysis.normal_form import from_sql
from obda.analysis.preprocess import preprocess
from obda.analysis.report import combine
from obda.model.sources_file import parse_sources

# Spec §7: streams S(A, B, C, τ1), T(D, E, τ2), U(F, τ3); Arasu's examples use the same names
# (his streams have no application time: the timestamps exist but the queries never compare them).
SPEC_SOURCES = """
tables:
  S:  {kind: stream, timestamp: t1, columns: {A: integer, B: integer, C: integer, D: integer, t1: timestamp}}
  T:  {kind: stream, timestamp: t2, columns: {D: integer, E: integer, F: integer, t2: timestamp}}
  U:  {kind: stream, timestamp: t3, columns: {F: integer, H: integer, I: integer, J: integer, t3: timestamp}}
  S1: {kind: stream, timestamp: ts, columns: {A: integer, B: integer, C: integer, D: integer, ts: timestamp}}
  S2: {kind: stream, timestamp: ts, columns: {E: integer, F: integer, G: integer, ts: timestamp}}
  S3: {kind: stream, timestamp: ts, columns: {H: integer, I: integer, J: integer, ts: timestamp}}
  R:  {kind: static, columns: {x: integer, y: integer, name: string, since: timestamp}, key: [x]}
  M:  {kind: stream, timestamp: ts, columns: {sensor: integer, value: decimal, label: string, ok: boolean, ts: timestamp}}
"""


@pytest.fixture(scope="session")
def sources():
    return parse_sources(SPEC_SOURCES, "spec_sources.yaml")


@pytest.fixture(scope="session")
def verdicts(sources):
    """``verdicts(sql) -> (poly verdict, naive verdict, report)``; both checkers on every part."""

    def run(sql: str):
        poly, naive = [], []
        for m in from_sql(sql, sources):
            for mq in preprocess(m):
                if not mq.satisfiable:
                    poly.append("bounded")
                    naive.append("bounded")
                    continue
                poly.append(check_polynomial(mq).verdict)
                naive.append(check_naive(mq).verdict)
        return combine(poly), combine(naive), analyze(sql, sources)

    return run
