"""A session as a Parquet table: one row per event, the payload as a typed struct column.

The event's own fields are plain columns (seq, slot, turn, round, trigger, source, dest,
t, duration); `payload` is a struct with one field per payload key seen anywhere in the
session, nested dicts as structs, lists as lists, each typed by what the session stored in
it: int64, float64 (ints and floats together, and the names a non-finite float is stored
as), bool, string. A key whose values disagree beyond that is a string of their JSON.
Query it with DuckDB as `payload.metrics.generated_tokens`. The log is read twice, once
to learn the types and once to write batches, so memory stays flat.
"""

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from eventlog.jsoncodec import encode_json
from fsm.event import Event

BATCH = 50_000
"""Rows per record batch (and per row group)."""
_NONFINITE = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


@dataclass
class Shape:
    """What one payload field (at any depth) held over the session."""

    scalars: set[type] = field(default_factory=set)
    names_only: bool = True  # every string was a non-finite float's name
    items: "Shape | None" = None  # of lists
    fields: "dict[str, Shape] | None" = None  # of dicts

    def see(self, value: Any) -> None:
        """Fold one value in."""
        if value is None:
            return
        if isinstance(value, dict):
            self.fields = {} if self.fields is None else self.fields
            for key, item in value.items():
                self.fields.setdefault(key, Shape()).see(item)
        elif isinstance(value, list):
            self.items = Shape() if self.items is None else self.items
            for item in value:
                self.items.see(item)
        else:
            self.scalars.add(type(value))
            if isinstance(value, str) and value not in _NONFINITE:
                self.names_only = False

    @property
    def kinds(self) -> int:
        """How many different kinds of value (scalar, list, dict) were seen."""
        return bool(self.scalars) + (self.items is not None) + (self.fields is not None)


def arrow_type(shape: Shape) -> Any:
    """The Arrow type for a field's shape; `string` of JSON text when it has none."""
    import pyarrow as pa

    if shape.kinds > 1:
        return pa.string()
    if shape.fields is not None:
        return pa.struct([(k, arrow_type(s)) for k, s in shape.fields.items()]) \
            if shape.fields else pa.string()
    if shape.items is not None:
        return pa.list_(arrow_type(shape.items))
    numbers = shape.scalars - {str}
    if shape.scalars == {bool}:
        return pa.bool_()
    if shape.scalars == {int}:
        return pa.int64()
    if numbers and numbers <= {int, float} and (str not in shape.scalars or shape.names_only):
        return pa.float64()
    if shape.scalars == {str}:
        return pa.string()
    return pa.string() if shape.scalars else pa.null()


def converter(shape: Shape, kind: Any) -> Callable[[Any], Any] | None:
    """How to turn a stored value into one of `kind` (None: it already is one)."""
    import pyarrow as pa

    if kind == pa.string() and (shape.kinds > 1 or shape.scalars != {str}):
        return lambda v: v if v is None else encode_json(v)
    if kind == pa.float64() and str in shape.scalars:
        return lambda v: _NONFINITE.get(v, v) if isinstance(v, str) else v
    if pa.types.is_list(kind) and shape.items is not None:
        inner = converter(shape.items, kind.value_type)
        return None if inner is None else lambda v: v if v is None else [inner(x) for x in v]
    if pa.types.is_struct(kind) and shape.fields:
        subs = {f.name: converter(shape.fields[f.name], f.type) for f in kind}
        subs = {k: c for k, c in subs.items() if c is not None}
        if subs:
            return lambda v: v if v is None else {
                k: (subs[k](x) if k in subs else x) for k, x in v.items()}
    return None


def payload_shape(events: Iterable[Event]) -> Shape:
    """The shape of every payload of `events` together."""
    shape = Shape(fields={})
    for ev in events:
        shape.see(ev.payload)
    return shape


def _batches(events: Iterable[Event], schema: Any,
             convert: Callable[[Any], Any] | None) -> Iterator[Any]:
    import pyarrow as pa

    rows = iter(events)
    while chunk := list(islice(rows, BATCH)):
        columns = [list(c) for c in zip(*((ev.seq, ev.slot, ev.turn, ev.round, ev.trigger.value,
                                          ev.source.value, ev.dest.value, ev.t, ev.duration,
                                          ev.payload) for ev in chunk), strict=True)]
        yield _batch(pa, columns, schema, convert)


def _batch(pa: Any, columns: list[list[Any]], schema: Any,
           convert: Callable[[Any], Any] | None) -> Any:
    if convert is not None:
        columns[9] = [convert(p) for p in columns[9]]
    width = len(schema)  # without a payload column when no event had one
    return pa.record_batch([pa.array(c, type=f.type) for c, f in
                            zip(columns[:width], schema, strict=True)], schema=schema)


def write_parquet(read: Callable[[], Iterable[Event]], path: Path,
                  metadata: dict[str, str] | None = None) -> int:
    """Write the events `read()` yields (called twice) to `path`; the number of rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    shape = payload_shape(read())
    fields = [("seq", pa.int64()), ("slot", pa.int32()), ("turn", pa.int32()),
              ("round", pa.int32()), ("trigger", pa.string()), ("source", pa.string()),
              ("dest", pa.string()), ("t", pa.float64()), ("duration", pa.float64())]
    convert = None
    if shape.fields:
        payload = arrow_type(shape)
        fields.append(("payload", payload))
        convert = converter(shape, payload)
    schema = pa.schema(fields, metadata=metadata)
    n = 0
    with pq.ParquetWriter(path, schema) as writer:
        for batch in _batches(read(), schema, convert):
            writer.write_batch(batch, row_group_size=BATCH)
            n += batch.num_rows
    return n
