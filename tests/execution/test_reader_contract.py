"""The reader contract (``obda/execution/reader.py``) as one table of cases, run on both backends.

Each case is a file; the local backend reads it with :func:`obda.execution.reader.read_records`,
Spark with :func:`obda.execution.spark_io._read` and its quarantine.  Both must give the same
accepted rows (typed values), the same rejects (line, reason, text), and, where the case says,
the expected outcome (so that both cannot agree on a wrong answer).
"""

from __future__ import annotations

import math
import uuid
from decimal import Decimal, localcontext

import pytest

from obda.execution.reader import Record, Rejected, read_records, typed
from obda.execution.rows import to_micros
from obda.model.sources import Column, ColumnType, Table, TableKind

pytestmark = pytest.mark.spark

T = ColumnType
TABLE = Table("s", TableKind.STREAM, (Column("s", T.STRING), Column("v", T.DOUBLE), Column("n", T.INTEGER),
                                      Column("d", T.DECIMAL), Column("b", T.BOOLEAN), Column("ts", T.TIMESTAMP)),
              timestamp="ts")
H = "s,v,n,d,b,ts\n"
TS = "2024-01-01T00:00:00Z"
ROW = f"a,1.5,1,2.5,true,{TS}\n"


def row(s="a", v="1.5", n="1", d="2.5", b="true", ts=TS) -> str:
    return ",".join((s, v, n, d, b, ts)) + "\n"


def json_row(**kw) -> str:
    import json

    base = {"s": "a", "v": 1.5, "n": 1, "d": 2.5, "b": True, "ts": TS}
    base.update(kw)
    return json.dumps({k: v for k, v in base.items() if v is not _DROP}) + "\n"


_DROP = object()
J = "json"

# (id, bytes, expected accepted rows, expected rejects (line, reason part)); fmt csv unless the id starts with "json"
CASES = [
    # -- encodings
    ("utf8", (H + ROW).encode(), 1, []),
    ("bom", b"\xef\xbb\xbf" + (H + ROW).encode(), 1, []),
    ("bom_only", b"\xef\xbb\xbf", 0, []),
    ("latin1_string", (H + ROW).encode() + b"\xe9t\xe9,1,1,1,true,2024-01-01T00:00:01Z\n", 1, [(3, "not UTF-8")]),
    ("latin1_number", (H + ROW).encode() + b"a,1\xb5,1,1,true,2024-01-01T00:00:01Z\n", 1, [(3, "not UTF-8")]),
    ("utf16", (H + ROW).encode("utf-16"), 0, [(1, "")]),
    ("bad_byte_in_header", b"s,v,n,d,b,t\xffs\n" + ROW.encode(), 0, [(1, "not UTF-8")]),
    ("non_ascii", (H + row(s="é€😀中")).encode(), 1, []),
    ("replacement_char_in_data", (H + row(s="a\ufffd")).encode(), 0, [(2, "not UTF-8")]),
    # -- headers
    ("reordered_header", ("ts,b,d,n,v,s\n" + f"{TS},true,2.5,1,1.5,a\n").encode(), 1, []),
    ("extra_header_column", ("s,x,v,n,d,b,ts\n" + f"a,zz,1.5,1,2.5,true,{TS}\n").encode(), 1, []),
    ("missing_column", ("s,v,n,d,b\n" + "a,1.5,1,2.5,true\n").encode(), 0, [(1, "does not name the column(s) ts")]),
    ("no_header", (ROW + ROW).encode(), 0, [(1, "does not name")]),
    ("header_case_and_spaces", (" S , V,N ,d,B,Ts\n" + ROW).encode(), 1, []),
    ("duplicate_header", ("s,v,n,d,b,ts,v\n" + f"a,1,1,1,true,{TS},2\n").encode(), 0, [(1, "twice")]),
    ("header_only", H.encode(), 0, []),
    ("header_only_no_newline", H.rstrip("\n").encode(), 0, []),
    ("empty_file", b"", 0, []),
    # -- white space
    ("spaces_around_integer", (H + row(n=" 15 ")).encode(), 1, []),
    ("spaces_around_double", (H + row(v=" 1.5 ")).encode(), 1, []),
    ("spaces_in_string_kept", (H + row(s=" a b ")).encode(), 1, []),
    ("spaces_around_boolean", (H + row(b=" true ")).encode(), 1, []),
    ("spaces_around_timestamp", (H + row(ts=f" {TS} ")).encode(), 1, []),
    ("tab_around_number", (H + row(n="\t7\t")).encode(), 1, []),
    # -- integers
    ("int_max", (H + row(n="9223372036854775807")).encode(), 1, []),
    ("int_overflow", (H + row(n="9223372036854775808")).encode(), 0, [(2, "column 'n' (integer)")]),
    ("int_min", (H + row(n="-9223372036854775808")).encode(), 1, []),
    ("int_with_point", (H + row(n="1.0")).encode(), 0, [(2, "64-bit integer")]),
    ("int_plus_sign_and_zeros", (H + row(n="+007")).encode(), 1, []),
    ("int_exponent", (H + row(n="1e3")).encode(), 0, [(2, "column 'n'")]),
    ("int_underscore", (H + row(n="1_000")).encode(), 0, [(2, "column 'n'")]),
    # -- doubles
    ("double_overflow_is_infinity", (H + row(v="1e400")).encode(), 1, []),
    ("double_nan", (H + row(v="NaN")).encode(), 1, []),
    ("double_infinities", (H + row(v="Infinity") + row(v="-inf") + row(v="INF")).encode(), 3, []),
    ("double_java_suffix_and_hex", (H + row(v="1d") + row(v="0x1p3")).encode(), 2, []),
    ("double_point_forms", (H + row(v="1.") + row(v=".5") + row(v="-.5e1")).encode(), 3, []),
    ("double_signed_nan", (H + row(v="-nan")).encode(), 0, [(2, "column 'v' (double)")]),
    ("double_garbage", (H + row(v="1x")).encode(), 0, [(2, '"1x" is not a number')]),
    # -- decimals
    ("decimal_rounds_half_up", (H + row(d="0.00000000005") + row(d="-0.00000000015")).encode(), 2, []),
    ("decimal_28_digits", (H + row(d="9" * 28 + ".5")).encode(), 1, []),
    ("decimal_29_digits", (H + row(d="1" + "0" * 28)).encode(), 0, [(2, "column 'd'")]),
    ("decimal_exponent", (H + row(d="1e27") + row(d="1.5E-3")).encode(), 2, []),
    ("decimal_nan", (H + row(d="NaN")).encode(), 0, [(2, "column 'd' (decimal)")]),
    # -- booleans
    ("boolean_words", (H + row(b="yes") + row(b="N") + row(b="0") + row(b="TRUE")).encode(), 4, []),
    ("boolean_bad", (H + row(b="2")).encode(), 0, [(2, "column 'b' (boolean)")]),
    # -- timestamps
    ("ts_space_no_zone", (H + row(ts="2024-01-01 00:00:01")).encode(), 1, []),
    ("ts_date_only", (H + row(ts="2024-01-02")).encode(), 1, []),
    ("ts_offsets", (H + row(ts="2024-01-01T01:00:00+01:00") + row(ts="2024-01-01T01:00:00+0100")
                    + row(ts="2024-01-01T01:00:00+01") + row(ts="2024-01-01T00:00:00-05:30")).encode(), 4, []),
    ("ts_offset_too_large", (H + row(ts="2024-01-01T00:00:00-23:59")).encode(), 0, [(2, "column 'ts'")]),
    ("ts_no_such_day", (H + row(ts="2024-02-30T00:00:00Z")).encode(), 0, [(2, "ISO 8601")]),
    ("ts_hour_24", (H + row(ts="2024-01-01T24:00:00Z")).encode(), 0, [(2, "column 'ts'")]),
    ("ts_nanoseconds", (H + row(ts="2024-01-01T00:00:00.123456789Z")).encode(), 1, []),
    ("ts_short_date", (H + row(ts="2024-1-1")).encode(), 0, [(2, "column 'ts'")]),
    ("ts_year_zero", (H + row(ts="0000-01-01T00:00:00Z")).encode(), 0, [(2, "column 'ts'")]),
    ("ts_missing", (H + row(ts="")).encode(), 0, [(2, "missing timestamp 'ts'")]),
    ("ts_without_seconds", (H + row(ts="2024-01-01T00:00")).encode(), 0, [(2, "column 'ts'")]),
    ("ts_epoch_number", (H + row(ts="1704067200")).encode(), 0, [(2, "column 'ts'")]),
    # -- quoting
    ("quoted_comma", (H + row(s='"a,b"')).encode(), 1, []),
    ("quoted_multiline", (H + row(s='"a\nb"') + row(s="c")).encode(), 2, []),
    ("quoted_multiline_crlf", (H + row(s='"a\nb"') + row(s="c")).replace("\n", "\r\n").encode(), 2, []),
    ("doubled_quotes", (H + row(s='"a""b"')).encode(), 1, []),
    ("backslash_escaped_quote", (H + row(s='"a\\"b"')).encode(), 1, []),
    ("unclosed_quote", (H + ROW + row(s='"oops')).encode(), 1, [(3, "malformed")]),
    ("quote_inside_unquoted", (H + row(s='a"b')).encode(), 1, []),
    ("empty_quoted_is_null", (H + row(s='""')).encode(), 1, []),
    # -- arity and lines
    ("too_few_fields", (H + ROW + "a,1\n").encode(), 1, [(3, "malformed")]),
    ("too_many_fields", (H + ROW + ROW.rstrip("\n") + ",extra\n").encode(), 1, [(3, "malformed")]),
    ("blank_lines", (H + "\n" + ROW + "\n\n" + ROW).encode(), 2, []),
    ("no_newline_at_end", (H + ROW.rstrip("\n")).encode(), 1, []),
    ("crlf_lines", (H + ROW + ROW).replace("\n", "\r\n").encode(), 2, []),
    ("cr_lines", (H + ROW + row(s='"a\nb"')).replace("\n", "\r").encode(), 2, []),
    ("header_with_unclosed_quote", ('s,"v,n,d,b,ts\n' + ROW).encode(), 0, [(1, "")]),
    ("bom_crlf_header_only", b"\xef\xbb\xbf" + H.replace("\n", "\r\n").encode(), 0, []),
    ("null_fields", (H + f",,,,,{TS}\n").encode(), 1, []),
    # -- huge fields
    ("huge_string_field", (H + row(s="x" * 5_000_000)).encode(), 1, []),
    ("huge_number_field", (H + row(n="1" * 5_000_000)).encode(), 0, [(2, "column 'n' (integer)")]),
    # -- JSON lines
    ("json_basic", (json_row() + json_row(n=2)).encode(), 2, []),
    ("json_bom", b"\xef\xbb\xbf" + json_row().encode(), 1, []),
    ("json_number_text_kept", json_row(d=1.50, v="2.5", n="15").encode(), 1, []),
    ("json_float_in_integer", json_row(n=1.0).encode(), 0, [(1, "column 'n' (integer)")]),
    ("json_boolean_in_string", json_row(s=True).encode(), 1, []),
    ("json_not_an_object", (json_row() + "[1, 2]\nnot json\n" + json_row()).encode(), 2, [(2, "not a JSON object"),
                                                                                       (3, "not a JSON object")]),
    ("json_nulls_and_missing", json_row(s=None, v=_DROP).encode(), 1, []),
    ("json_key_case_is_exact", json_row(s=_DROP).replace('{"v"', '{"S": "x", "v"').encode(), 1, []),
    ("json_empty_string_is_null", json_row(s="", n="").encode(), 1, []),
    ("json_latin1", json_row().encode() + b'{"s": "\xe9", "ts": "2024-01-01T00:00:00Z"}\n', 1, [(2, "not UTF-8")]),
    ("json_blank_lines_crlf", ("\r\n" + json_row() + "\r\n" + json_row()).replace("}\n", "}\r\n").encode(), 2, []),
    ("json_nested_compact", json_row().replace('"s": "a"', '"s": {"k":[1,2]}').encode(), 1, []),
    ("json_big_integer", json_row(n=99999999999999999999).encode(), 0, [(1, "column 'n'")]),
    ("json_timestamp_number", json_row(ts=1704067200).encode(), 0, [(1, "column 'ts'")]),
    ("json_no_newline_at_end", json_row().rstrip("\n").encode(), 1, []),
    ("json_huge_string", json_row(s="y" * 5_000_000).encode(), 1, []),
]


def _norm(v):
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, Decimal):
        with localcontext() as ctx:
            ctx.prec = 80
            return ("decimal", v.normalize() if v else Decimal(0))
    return v


def _local(path, fmt):
    rows, rejects = [], []
    for rec in read_records(str(path), TABLE, fmt):
        if isinstance(rec, Rejected):
            rejects.append((rec.line, rec.reason, rec.text))
            continue
        assert isinstance(rec, Record)
        got, why = typed(TABLE, rec.fields)
        if got is None:
            from obda.execution.reader import row_text

            rejects.append((rec.line, why, row_text(TABLE, rec.fields)))
        else:
            rows.append(tuple(_norm(got[c.name]) for c in TABLE.columns))
    return sorted(rows, key=repr), sorted(rejects, key=repr)


def _spark(spark, path, fmt):
    from obda.execution.spark_io import _read, _valid_sql
    from obda.execution.spark_reader import _quarantine_rows, whole_file_rejects

    frame = _read(spark, TABLE, [str(path)], fmt)
    valid, _ = _valid_sql(TABLE, frame)
    rows = []
    for r in frame.df.where(valid).select(*[c.name for c in TABLE.columns]).collect():
        vals = list(r)
        vals[-1] = to_micros(vals[-1])
        rows.append(tuple(_norm(v) for v in vals))
    quarantined = _quarantine_rows(frame, TABLE, None, fmt, [str(path)])
    assert all(q["file"] == str(path) for q in quarantined)  # the file as listed, not Spark's URL
    rejects = [(q["line"], q["reason"], q["row"]) for q in quarantined + whole_file_rejects(TABLE, fmt, [str(path)])]
    return sorted(rows, key=repr), sorted(rejects, key=repr)


def test_the_table_has_at_least_sixty_cases():
    assert len(CASES) >= 60 and len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_both_backends_read_a_file_alike(spark, tmp_path, case):
    name, data, n_rows, expected_rejects = case
    fmt = "json" if name.startswith("json") else "csv"
    path = tmp_path / f"{uuid.uuid4().hex}.{fmt}"
    path.write_bytes(data)
    local = _local(path, fmt)
    on_spark = _spark(spark, path, fmt)
    assert on_spark == local
    rows, rejects = local
    assert len(rows) == n_rows
    assert len(rejects) == len(expected_rejects), rejects
    for (line, part), (got_line, reason, _) in zip(sorted(expected_rejects), sorted(rejects, key=lambda r: r[0] or 0)):
        assert got_line == line and part in reason, (got_line, reason)
