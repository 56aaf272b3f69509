"""Overhead of recording on a sim run: the same session with the journal discarding
events, and with the batched SQLite recorder. Writes bench/results/recording_overhead.json.

    .venv/bin/python bench/recording_overhead.py [--answer-tokens N] [--repeat R]
"""

import argparse
import json
import tempfile
import time
from pathlib import Path

from engine.config import RunConfig
from engine.session import Session
from eventlog import NullRecorder, Recorder, create_session, open_db

RESULTS = Path(__file__).parent / "results"


def _timed_run(config: RunConfig, record: bool, db_dir: Path, i: int) -> tuple[float, int]:
    if not record:
        t = time.perf_counter()
        Session(config, NullRecorder()).run()
        return time.perf_counter() - t, 0
    engine = open_db(str(db_dir / f"bench-{i}.db"), create=True)
    t = time.perf_counter()
    sid = create_session(engine, config=config.to_dict(), backend="sim", seeds={},
                         code_version="bench")
    with Recorder(engine, sid) as rec:
        Session(config, rec).run()
    return time.perf_counter() - t, rec.written


def main() -> None:
    """Measure and write the results file."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--answer-tokens", type=int, default=4000)
    p.add_argument("--turns", type=int, default=3)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--out", type=Path, default=RESULTS / "recording_overhead.json")
    args = p.parse_args()
    config = RunConfig(turns=args.turns, answer_tokens=args.answer_tokens,
                       prompt_tokens=2048, acceptance=0.7, draft_max=8)
    off, on, events = [], [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            off.append(_timed_run(config, False, Path(tmp), i)[0])
            dt, events = _timed_run(config, True, Path(tmp), i)
            on.append(dt)
    best_off, best_on = min(off), min(on)
    result = {
        "config": config.to_dict(),
        "events": events,
        "seconds_recording_off": best_off,
        "seconds_recording_on": best_on,
        "overhead_fraction": best_on / best_off - 1.0,
        "engine_events_per_s_recording_on": events / best_on,
        "repeat": args.repeat,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{events} events: recording off {best_off:.3f} s, on {best_on:.3f} s, "
          f"overhead {100 * result['overhead_fraction']:.1f}% -> {args.out}")


if __name__ == "__main__":
    main()
