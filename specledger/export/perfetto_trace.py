"""A timeline as a Perfetto protobuf trace (open it in ui.perfetto.dev).

Written with the `perfetto` package's streaming trace builder and its trace protos, one
packet at a time, so a long session needs no more memory than a short one. The session is
a process; each slot a track under it, with a counter track per counter kind beneath it.
Slices are TrackEvent begin/end pairs, findings instant events, and arguments debug
annotations.
"""

from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from specledger.export.timeline import (
    CounterKind,
    CounterValue,
    Record,
    SliceBegin,
    SliceEnd,
)

SEQUENCE_ID = 1
"""The trusted packet sequence every packet of the file belongs to."""


def annotate(annotation: Any, value: Any) -> None:
    """Put `value` (JSON-like: a scalar, list or dict) into a DebugAnnotation."""
    if isinstance(value, bool):
        annotation.bool_value = value
    elif isinstance(value, int):
        annotation.int_value = value
    elif isinstance(value, float):
        annotation.double_value = value
    elif isinstance(value, str):
        annotation.string_value = value
    elif isinstance(value, dict):
        for key, item in value.items():
            entry = annotation.dict_entries.add()
            entry.name = str(key)
            annotate(entry, item)
    elif isinstance(value, list | tuple):
        for item in value:
            annotate(annotation.array_values.add(), item)
    else:  # None: annotations have no null of their own, JSON does
        annotation.legacy_json_value = "null"


class _Writer:
    """Packets to a stream; tracks are described the first time they are used."""

    def __init__(self, out: IO[bytes], session: int) -> None:
        from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import (
            CounterDescriptor,
            TracePacket,
            TrackEvent,
        )
        from perfetto.trace_builder.proto_builder import StreamingTraceProtoBuilder

        self._builder = StreamingTraceProtoBuilder(out)
        self._event, self._counter = TrackEvent, CounterDescriptor
        self._tracks: set[int] = set()
        self._root = 1
        packet = self._new()
        packet.sequence_flags = TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
        packet.track_descriptor.uuid = self._root
        packet.track_descriptor.process.pid = session
        packet.track_descriptor.process.process_name = f"specledger session {session}"
        self._builder.write_packet(packet)

    def _new(self) -> Any:
        packet = self._builder.create_packet()
        packet.trusted_packet_sequence_id = SEQUENCE_ID
        return packet

    def _track(self, slot: int, kind: CounterKind | None = None) -> int:
        """The uuid of the slot's track (or of its counter track of `kind`), described on
        first use."""
        uuid = slot_uuid(slot) + (0 if kind is None else 1 + list(CounterKind).index(kind))
        if uuid not in self._tracks:
            self._tracks.add(uuid)
            packet = self._new()
            desc = packet.track_descriptor
            desc.uuid = uuid
            if kind is None:
                desc.parent_uuid, desc.name = self._root, f"slot {slot}"
            else:
                desc.parent_uuid, desc.name = self._track(slot), f"slot {slot} {kind.value}"
                if kind is CounterKind.CHECKPOINT_BYTES:
                    desc.counter.unit = self._counter.UNIT_SIZE_BYTES
            self._builder.write_packet(packet)
        return uuid

    def write(self, record: Record) -> None:
        """One record as one packet."""
        packet = self._new()
        packet.timestamp = record.ts
        ev = packet.track_event
        if isinstance(record, CounterValue):
            ev.track_uuid = self._track(record.slot, record.kind)
            ev.type = self._event.TYPE_COUNTER
            ev.double_counter_value = record.value
        else:
            ev.track_uuid = self._track(record.slot)
            if isinstance(record, SliceBegin):
                ev.type, ev.name = self._event.TYPE_SLICE_BEGIN, record.name
                ev.categories.append(record.level.value)
            elif isinstance(record, SliceEnd):
                ev.type = self._event.TYPE_SLICE_END
            else:
                ev.type, ev.name = self._event.TYPE_INSTANT, record.name
                ev.categories.append("finding")
            for key, value in record.args.items():
                annotation = ev.debug_annotations.add()
                annotation.name = key
                annotate(annotation, value)
        self._builder.write_packet(packet)


def slot_uuid(slot: int) -> int:
    """The track uuid of a slot (counters follow it): a block of uuids per slot."""
    return 16 * (slot + 1)


def write_perfetto(records: Iterable[Record], session: int, path: Path) -> int:
    """Write `records` to `path` as a Perfetto trace; the number of records."""
    n = 0
    with path.open("wb") as out:
        writer = _Writer(out, session)
        for record in records:
            writer.write(record)
            n += 1
    return n
