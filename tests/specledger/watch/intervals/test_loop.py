"""`watch --vllm-log` / `--sglang-log`: a log appended line by line is recorded as
`import` records it whole (each server run a session, the same events and configuration),
its interval events stored while the run goes on; a crash is reported once its lines are
read; a server started again in the file is a run of its own; a rotation ends the old
file's runs; a watch stopped inside a run reads it again whole and replaces its
session."""

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from eventlog import list_sessions, open_db
from eventlog.reader import get_session, scan_events
from specbench.interval_logs import corpus_root
from specledger.runs.interval_import import import_paths
from specledger.watch.intervals.lines import READERS
from specledger.watch.intervals.loop import IntervalWatcher
from specledger.watch.options import LogEngine, WatchOptions
from specledger.watch.store import load_cursor

VLLM_FIXTURE = Path(__file__).parents[3] / "adapters" / "vllm" / "log" / "fixtures"


def corpus(engine: str) -> Path:
    """The real logs users published (../shared/real-logs/ENGINE beside the checkout, or
    under `SPECLEDGER_REAL_LOGS_ROOT`), read where they are."""
    folder = corpus_root() / engine
    assert folder.is_dir(), f"the real-log corpus is missing at {folder}"
    return folder


def vllm_run() -> bytes:
    """One whole vLLM server run of our own capture (`make vllm`, default verbosity)."""
    return gzip.decompress((VLLM_FIXTURE / "default.log.gz").read_bytes())


def watcher(tmp_path: Path, engine: LogEngine, settle_s: float = 3600.0,
            said: list[str] | None = None, **opts: Any) -> IntervalWatcher:
    """A watcher of `tmp_path/s.log`; by default the log never settles between polls, so
    what waits for it waits."""
    log = tmp_path / "s.log"
    log.touch()
    return IntervalWatcher(WatchOptions(log=log, db=str(tmp_path / "l.db"), engine=engine,
                                        settle_s=settle_s, **opts),
                           (said if said is not None else []).append)


def append_lines(w: IntervalWatcher, log: Path, data: bytes, every: int = 7) -> None:
    """Append `data` to `log` line by line, a poll after every `every` lines."""
    with log.open("ab") as out:
        for i, line in enumerate(data.splitlines(keepends=True)):
            out.write(line)
            out.flush()
            if i % every == 0:
                w.step()
    w.step()


def stored(db: str) -> list[tuple[str, list[Any], dict[str, Any]]]:
    """Each session's status, events and configuration (less where it was read from)."""
    engine = open_db(db, create=False)
    out = []
    for s in list_sessions(engine):
        config = dict(get_session(engine, s.id).config)
        config.pop("watch", None)
        config["source"] = {k: v for k, v in config["source"].items()
                            if k not in ("path", "sha256", "prefixes", "peers")}
        events = [(e.seq, e.turn, e.trigger, e.t, e.payload) for e in scan_events(engine, s.id)]
        out.append((s.status.value, events, config))
    return out


def imported(tmp_path: Path, engine: LogEngine, data: bytes) -> list[Any]:
    """What `import` records of `data`."""
    log = tmp_path / "whole.log"
    log.write_bytes(data)
    db = str(tmp_path / "import.db")
    from specledger.cli.import_ import ImportFormat, interval_readers

    list(import_paths(db, [log], interval_readers()[ImportFormat(engine.value)]))
    return stored(db)


def test_a_run_is_recorded_as_import_records_it_and_its_intervals_as_they_come(
        tmp_path: Path) -> None:
    data = vllm_run()
    w = watcher(tmp_path, LogEngine.VLLM)
    append_lines(w, tmp_path / "s.log", data)
    [(status, events, _)] = stored(str(tmp_path / "l.db"))
    whole = imported(tmp_path, LogEngine.VLLM, data)
    [(_, all_events, _)] = whole
    # While the run goes on its session is open and holds every interval but the newest,
    # which waits for the next one (a SpecDecoding line may still join it).
    assert status == "running" and 0 < len(events) < len(all_events)
    assert events == all_events[:len(events)]
    w.finish()
    assert stored(str(tmp_path / "l.db")) == whole
    assert (w.tally.recorded, w.tally.incomplete) == (1, 0)  # the run shut down


def test_a_server_started_again_in_the_file_is_a_run_of_its_own(tmp_path: Path) -> None:
    data = vllm_run() * 2
    w = watcher(tmp_path, LogEngine.VLLM)
    append_lines(w, tmp_path / "s.log", data)
    first, second = stored(str(tmp_path / "l.db"))
    assert (first[0], second[0]) == ("finished", "running")  # closed when the second began
    w.finish()
    assert stored(str(tmp_path / "l.db")) == imported(tmp_path, LogEngine.VLLM, data)


def test_a_rotation_ends_the_old_files_runs(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    w = watcher(tmp_path, LogEngine.VLLM)
    append_lines(w, log, vllm_run())
    log.rename(tmp_path / "s.log.1")
    append_lines(w, log, vllm_run())
    assert [s[0] for s in stored(str(tmp_path / "l.db"))] == ["finished", "running"]
    w.finish()
    assert w.tally.switches == ["rotated"]
    once = imported(tmp_path, LogEngine.VLLM, vllm_run())
    assert stored(str(tmp_path / "l.db")) == once * 2


def test_a_crash_is_reported_once_its_lines_are_read(tmp_path: Path) -> None:
    data = (corpus("vllm") / "vllm-project-vllm-40756-qwen36-27b-mtp5-tp4-ima-crash.log"
            ).read_bytes()
    said: list[str] = []
    w = watcher(tmp_path, LogEngine.VLLM, settle_s=0.0, said=said)
    append_lines(w, tmp_path / "s.log", data)
    assert [line.split(") ", 1)[1].split(":")[0] for line in said] == [
        "error server_crash", "error server_crash"]
    assert "Worker proc VllmWorker-0 died unexpectedly" in said[0]
    assert "EngineCore encountered a fatal error" in said[1]
    w.finish()
    assert len(said) == 2  # reported once
    assert stored(str(tmp_path / "l.db")) == imported(tmp_path, LogEngine.VLLM, data)
    assert stored(str(tmp_path / "l.db"))[0][0] == "failed"


def test_an_sglang_crash_is_reported_as_json_and_to_the_hook(tmp_path: Path) -> None:
    data = (corpus("sglang") / "sgl-project-sglang-31103-qwen36-35b-a3b-fp8-h20-v0.5.15-"
            "crash.log").read_bytes()
    docs: list[dict[str, Any]] = []
    hooked = tmp_path / "hook.json"
    log = tmp_path / "s.log"
    log.touch()
    w = IntervalWatcher(WatchOptions(log=log, db=str(tmp_path / "l.db"), settle_s=0.0,
                                     engine=LogEngine.SGLANG, on_finding=f"cat > {hooked}"),
                        print, docs.append)
    append_lines(w, log, data)
    w.finish()
    [doc] = docs
    assert (doc["engine"], doc["run"], doc["kind"], doc["session"]) == (
        "sglang", 1, "server_crash", 1)
    assert doc["numbers"]["failure"] == "scheduler_crash"
    assert json.loads(hooked.read_text())["numbers"] == doc["numbers"]
    assert stored(str(tmp_path / "l.db")) == imported(tmp_path, LogEngine.SGLANG, data)


def test_sglang_runs_one_after_another_are_recorded_as_import_records_them(
        tmp_path: Path) -> None:
    one = (corpus("sglang") / "sostrowsk-dgx-spark-local-llm-gb10-laguna-int4-dflash-"
           "v0.5.16-complete.log").read_bytes()
    data = one * 2
    w = watcher(tmp_path, LogEngine.SGLANG)
    append_lines(w, tmp_path / "s.log", data, every=31)
    w.finish()
    got = stored(str(tmp_path / "l.db"))
    assert len(got) == 2 and got == imported(tmp_path, LogEngine.SGLANG, data)


def test_a_watch_stopped_inside_a_run_reads_it_again_and_replaces_its_session(
        tmp_path: Path) -> None:
    data = vllm_run()
    # Stopped two lines after the run's first stats line.
    half = data[:data.index(b"\n", data.index(b"\n", data.index(b"Avg prompt throughput")) + 1)
                + 1]
    first = watcher(tmp_path, LogEngine.VLLM)
    append_lines(first, tmp_path / "s.log", half)
    first.finish()
    [(status, events, _)] = stored(str(tmp_path / "l.db"))
    assert status == "finished" and events  # the run so far, closed as the log ended
    cursor = load_cursor(open_db(str(tmp_path / "l.db"), create=False),
                         str(tmp_path / "s.log"))
    assert cursor is not None and cursor.offset == 0  # the run's first line
    again = watcher(tmp_path, LogEngine.VLLM)
    assert again.tally.resumed_at == 0
    append_lines(again, tmp_path / "s.log", data[len(half):])
    again.finish()
    assert stored(str(tmp_path / "l.db")) == imported(tmp_path, LogEngine.VLLM, data)


@pytest.mark.parametrize("engine", list(READERS))
def test_a_log_of_another_engine_records_nothing(tmp_path: Path, engine: LogEngine) -> None:
    w = watcher(tmp_path, engine)
    append_lines(w, tmp_path / "s.log", b"".join(b"just some text %d\n" % i for i in range(40)))
    w.finish()
    assert stored(str(tmp_path / "l.db")) == [] and w.tally.recorded == 0
