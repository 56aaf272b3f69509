"""The interval engines' readers, fed a live file line by line, behind one shape: each
physical line in, the file's server runs so far out, as the engine-neutral interval runs
`import` records (adapters/logs/intervals/run.py). A file's outer prefix is learned as its
lines come (`import` learns it from a file's first lines before reading)."""

from typing import Protocol

from adapters.logs.intervals.run import ServerRun
from adapters.logs.prefix import Prefixes
from adapters.sglang.log.intervals import server_run
from adapters.sglang.log.reader import LogReader
from adapters.vllm.log.lines import TAG
from adapters.vllm.log.reader import FileRuns
from specledger.watch.options import LogEngine


class RunLines(Protocol):
    """One file's lines in, its server runs out."""

    def feed(self, number: int, raw: str) -> None:
        """Read physical line `number` (without its newline)."""

    def count(self) -> int:
        """How many runs have begun."""

    def runs(self) -> list[ServerRun]:
        """Every run so far: the ended ones as they ended, the last one as read so far."""

    def finish(self) -> list[ServerRun]:
        """Every run, the last one ended where the file's lines end."""


class VllmLines:
    """vLLM's reader (adapters/vllm/log/)."""

    def __init__(self) -> None:
        self.file = FileRuns(Prefixes(TAG))

    def feed(self, number: int, raw: str) -> None:
        """Read physical line `number`."""
        self.file.feed(number, raw)

    def count(self) -> int:
        """How many runs have begun."""
        return len(self.file.done) + (self.file.current is not None)

    def runs(self) -> list[ServerRun]:
        """The ended runs, and the one being read."""
        current = self.file.current
        return self.file.done + ([current.run] if current is not None else [])

    def finish(self) -> list[ServerRun]:
        """Every run, ended."""
        return self.file.finish()


class SglangLines:
    """SGLang's reader (adapters/sglang/log/); a run is made engine-neutral when asked
    for, an ended one once."""

    def __init__(self) -> None:
        self.reader = LogReader()
        self._ended: list[ServerRun] = []

    def feed(self, number: int, raw: str) -> None:
        """Read physical line `number`."""
        self.reader.feed(number, raw)

    def count(self) -> int:
        """How many runs have begun."""
        return len(self.reader.runs)

    def runs(self) -> list[ServerRun]:
        """The ended runs, and the one being read."""
        readers = self.reader.runs
        while len(self._ended) < len(readers) - 1:  # a later start ended it
            self._ended.append(server_run(readers[len(self._ended)].finish(replaced=True)))
        return self._ended + ([server_run(readers[-1].out)] if readers else [])

    def finish(self) -> list[ServerRun]:
        """Every run, ended."""
        ended = self.runs()[:-1]
        readers = self.reader.runs
        return ended + ([server_run(readers[-1].finish(replaced=False))] if readers else [])


READERS: dict[LogEngine, type[VllmLines] | type[SglangLines]] = {
    LogEngine.VLLM: VllmLines,
    LogEngine.SGLANG: SglangLines,
}
