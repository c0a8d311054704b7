"""Query stage: SPARQL 1.1 SELECT text → :class:`obda.model.query.Query` (a UCQ with application time)."""

from obda.query.parser import parse_query

__all__ = ["parse_query"]
