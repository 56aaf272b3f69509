"""A recorded session's journal calls (append, end of unit, flush), kept to be played into
a recorder again: the ingest suite's writers replay one engine run into many sessions."""

from dataclasses import dataclass, field
from enum import Enum

from eventlog import Recorder
from fsm.event import Event


class Call(Enum):
    """A journal call the engine makes."""

    APPEND = "append"
    END_UNIT = "end_unit"
    FLUSH = "flush"


@dataclass(frozen=True, slots=True)
class JournalCall:
    """One call, with its event for an append."""

    call: Call
    event: Event | None = None


@dataclass
class ScriptJournal:
    """An engine journal that keeps the calls it gets, to be played back later."""

    calls: list[JournalCall] = field(default_factory=list)

    def append(self, event: Event) -> None:
        """Keep the append."""
        self.calls.append(JournalCall(Call.APPEND, event))

    def end_unit(self) -> None:
        """Keep the end of a unit."""
        self.calls.append(JournalCall(Call.END_UNIT))

    def flush(self) -> None:
        """Keep the flush."""
        self.calls.append(JournalCall(Call.FLUSH))

    @property
    def events(self) -> int:
        """How many events the calls append."""
        return sum(c.call is Call.APPEND for c in self.calls)


def play(rec: Recorder, calls: list[JournalCall]) -> None:
    """Make the calls on `rec`, then close it `finished`."""
    append, end_unit, flush = rec.append, rec.end_unit, rec.flush
    for c in calls:
        if c.call is Call.APPEND:
            append(c.event)  # type: ignore[arg-type]
        elif c.call is Call.END_UNIT:
            end_unit()
        else:
            flush()
    rec.close()
