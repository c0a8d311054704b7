"""R2RML mappings: parse (Turtle → model), validate (against ontology and sources), materialise (oracle)."""

from obda.mapping.materialise import materialise
from obda.mapping.parse import load_mapping, parse_mapping_text
from obda.mapping.rdf_terms import graph_time, time_graph_iri
from obda.mapping.sql import LogicalTableInfo, describe_logical_table
from obda.mapping.validate import check_mapping, load_validated_mapping, validate_mapping

__all__ = [
    "load_mapping",
    "parse_mapping_text",
    "validate_mapping",
    "check_mapping",
    "load_validated_mapping",
    "materialise",
    "time_graph_iri",
    "graph_time",
    "describe_logical_table",
    "LogicalTableInfo",
    "unfold",
]
from obda.mapping.unfold import unfold  # noqa: E402
