"""`specledger export S --format parquet`: pyarrow and DuckDB read one row per event with
typed payload columns, and queries over them reproduce `show`'s per-turn numbers."""

import dataclasses
import json
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eventlog import open_db, scan_events
from fsm.turn_metrics import TurnMetrics
from specledger.cli.main import main
from specledger.export.parquet_table import Shape, arrow_type, converter

RUN = ["--backend", "sim", "--slots", "2", "--turns", "2", "--prompt-tokens", "64",
       "--question-tokens", "8", "--answer-tokens", "60", "--eog-policy", "legacy",
       "--replay-policy", "reverify", "--tie-flip-rate", "0.05"]
# What the events themselves say about each turn, beside the turn-end metrics.
FROM_EVENTS = """
SELECT slot, turn,
  sum(payload.drafted) FILTER (WHERE trigger IN ('verify', 'decode')) AS drafted,
  sum(payload.accepted) FILTER (WHERE trigger = 'commit') AS accepted,
  count(*) FILTER (WHERE trigger = 'restore') AS restores,
  count(*) FILTER (WHERE trigger = 'commit') AS rounds,
  sum(len(payload.append)) FILTER (WHERE trigger IN ('prefill', 'commit')) AS committed,
  max(payload.prompt_tokens) FILTER (WHERE trigger = 'start_turn') AS prompt_tokens,
  max(payload.kept) FILTER (WHERE trigger = 'start_turn') AS kept_tokens,
  max(payload.f_keep) FILTER (WHERE trigger = 'start_turn') AS f_keep
FROM read_parquet($path) WHERE turn > 0 GROUP BY slot, turn ORDER BY slot, turn
"""


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_a_query_reproduces_show(db_url: str, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    sid = _json(capsys, "run", "--db", db_url, "--json", *RUN)["session"]
    out = tmp_path / "s.parquet"
    doc = _json(capsys, "export", str(sid), "--db", db_url, "--format", "parquet", "--out",
                str(out), "--json")
    events = list(scan_events(open_db(db_url, False), sid))
    assert doc["records"] == len(events)

    table = pq.read_table(out)
    assert table.num_rows == len(events)
    assert table.column("seq").to_pylist() == [e.seq for e in events]
    payload = table.schema.field("payload").type
    assert payload.field("append").type == pa.list_(pa.int64())
    assert payload.field("digest").type == pa.string()
    assert payload.field("metrics").type.field("f_keep").type == pa.float64()
    assert table.schema.metadata[b"specledger.session"] == str(sid).encode()

    shown = {(t["slot"], t["turn"]): t for t in _json(capsys, "show", str(sid), "--db", db_url,
                                                      "--json")["turns"]}
    fields = [f.name for f in dataclasses.fields(TurnMetrics)]  # what the turn end records
    metrics = duckdb.execute(
        f"SELECT {', '.join(f'payload.metrics.{k}' for k in fields)} FROM read_parquet($path) "
        "WHERE trigger = 'end_turn' ORDER BY slot, turn", {"path": str(out)}).fetchall()
    assert [dict(zip(fields, row, strict=True)) for row in metrics] == [
        {k: shown[key][k] for k in fields} for key in sorted(shown)]

    cursor = duckdb.execute(FROM_EVENTS, {"path": str(out)})
    names = [d[0] for d in cursor.description]
    for row in cursor.fetchall():
        got = dict(zip(names, row, strict=True))
        want = shown[(got["slot"], got["turn"])]
        for key in ("drafted", "accepted", "restores", "rounds", "prompt_tokens",
                    "kept_tokens", "f_keep"):
            assert got[key] == want[key], key
        assert got["committed"] == want["generated_tokens"] + want["stray_tokens"]


def test_column_types_follow_what_the_session_stored() -> None:
    payloads = [{"n": 1, "x": 1, "err": 0.5, "mixed": 1, "tags": ["a"], "none": None,
                 "m": {"k": 1}},
                {"n": 2, "x": 2.5, "err": "Infinity", "mixed": "one", "tags": [1],
                 "none": None, "m": {"k": 2, "j": True}}]
    shape = Shape(fields={})
    for p in payloads:
        shape.see(p)
    kind = arrow_type(shape)
    assert {f.name: f.type for f in kind} == {
        "n": pa.int64(), "x": pa.float64(), "err": pa.float64(), "mixed": pa.string(),
        "tags": pa.list_(pa.string()), "none": pa.null(),
        "m": pa.struct([("k", pa.int64()), ("j", pa.bool_())])}
    convert = converter(shape, kind)
    assert convert is not None
    rows = pa.array([convert(p) for p in payloads], type=kind).to_pylist()
    assert [r["err"] for r in rows] == [0.5, float("inf")]
    assert [r["mixed"] for r in rows] == ["1", '"one"']  # each as its JSON text
    assert [r["tags"] for r in rows] == [['"a"'], ["1"]]
    assert rows[1]["m"] == {"k": 2, "j": True} and rows[0]["m"] == {"k": 1, "j": None}


def test_an_interval_sessions_series_is_queryable(tmp_path: Path) -> None:
    """`import vllm` then `export parquet`: each interval's figures as typed columns, the
    per-position acceptance a list, a figure no line gave null."""
    from tests.adapters.vllm.log.test_reader import FIXTURES

    db, out = str(tmp_path / "l.db"), tmp_path / "s.parquet"
    assert main(["import", "vllm", str(FIXTURES / "default.log.gz"), "--db", db]) == 0
    assert main(["export", "1", "--format", "parquet", "--out", str(out), "--db", db]) == 0
    rows = duckdb.sql(f"select payload.drafted, payload.accepted, payload.acc_per_pos, "
                      f"payload.prefix_hit_rate from '{out}' where trigger = 'interval' "
                      "and payload.drafted is not null").fetchall()
    assert sum(r[0] for r in rows) == 56 and sum(r[1] for r in rows) == 36
    assert all(len(r[2]) == 2 and r[3] is None for r in rows)
