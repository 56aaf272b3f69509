"""The engines' readers fed a live file line by line give, once the file ends, the runs
`import` reads from the whole file (the live reader learns the file's prefix as its lines
come, `import` from its first lines)."""

from dataclasses import asdict
from pathlib import Path

import pytest

from adapters.logs.sources import LogSource
from specledger.import_cmd import INTERVAL_READERS, ImportFormat
from specledger.watch.intervals.lines import READERS
from specledger.watch.options import LogEngine
from tests.specledger.watch.intervals.test_loop import corpus

LOGS = [(LogEngine.VLLM, "99sono-DockerBuildFiles-dgxspark-qwen36-35b-nvfp4-mtp2-v0.20.1-"
                         "complete.log"),
        (LogEngine.VLLM, "vllm-project-vllm-40756-qwen36-27b-mtp5-tp4-ima-crash.log"),
        (LogEngine.SGLANG, "sgl-project-sglang-28431-qwen36-mtp-v0.5.13-crash.log"),
        (LogEngine.SGLANG, "sgl-project-sglang-11948-qwen3-8b-eagle3-a800-tp2.log")]


@pytest.mark.parametrize(("engine", "name"), LOGS, ids=[n for _, n in LOGS])
def test_line_by_line_gives_the_runs_of_the_whole_file(engine: LogEngine, name: str) -> None:
    path = corpus(engine.value) / name
    lines = READERS[engine]()
    counts = []
    for number, raw in enumerate(path.read_bytes().split(b"\n")[:-1], 1):
        lines.feed(number, raw.decode("utf-8", errors="surrogateescape"))
        counts.append(lines.count())
        if number % 13 == 0:  # a live snapshot leaves the runs it shows unchanged
            assert len(lines.runs()) == lines.count()
    whole = INTERVAL_READERS[ImportFormat(engine.value)](LogSource((Path(path),))).runs
    assert [asdict(r) for r in lines.finish()] == [asdict(r) for r in whole]
    assert counts == sorted(counts) and counts[-1] == len(whole)
