"""`make demo`: the #28049 amplification, on the real engine and at 27B scale.

Each part runs one conversation twice, differing only in the EOG policy. `legacy` commits
the whole accepted block and leaves stray tokens behind EOG, so the next prompt no longer
extends the slot, the recurrent state falls back to the checkpoint before the generation
header and the whole previous answer plus the template tokens are prefilled again.
`truncate` cuts the block at EOG first: f_keep = 1.0 and no history is prefilled twice.

Part 1 runs the shipped hybrid model (torch backend, MTP drafter) on this machine; part 2
simulates Qwen3.5-27B on an H200 with 1,500-token answers.
"""

import importlib.util
import sys
from pathlib import Path
from typing import Any

from engine.config import EogPolicy, RunConfig
from engine.files import OutputPathError, write_file
from eventlog import open_db, scan_events
from specledger.api import run_session
from specledger.views import output
from viz import GraphFormat, fsm_graph, image, to_dot

REAL_CONFIG = RunConfig(
    backend="torch", drafter="mtp", draft_max=4, turns=3, max_answer_tokens=384,
)
SIM_CONFIG = RunConfig(
    profile="qwen3.5-27b-h200", drafter="synthetic", acceptance=0.9, draft_max=8, turns=3,
    prompt_tokens=2048, question_tokens=48, answer_tokens=1500,
)
PARTS = (
    ("real engine: the shipped hybrid model on this CPU, MTP drafter", REAL_CONFIG),
    ("Qwen3.5-27B on one H200, simulated", SIM_CONFIG),
)


def _part(label: str, base: RunConfig, db: str, out_dir: Path, seed: int,
          as_json: bool) -> dict[str, Any]:
    runs = []
    for policy in (EogPolicy.LEGACY, EogPolicy.TRUNCATE):
        config = base.replace(eog_policy=policy.value, seed=seed)
        result = run_session(config, db)
        engine = open_db(db, create=False)
        dot = to_dot(fsm_graph(scan_events(engine, result.session_id)),
                     f"session {result.session_id}: eog={policy.value}")
        graph = write_file(out_dir / f"session-{result.session_id}-{policy.value}-fsm.svg",
                           image(dot, GraphFormat.SVG))
        total = sum(m.reprefill_tokens for m in result.turns)
        runs.append({"session": result.session_id, "eog_policy": policy.value,
                     "reprefill_tokens": total, "graph": str(graph),
                     "turns": output.turn_rows(result.turns)})
        if not as_json:
            output.console.print(output.turn_table(
                result.turns, f"{label}: eog={policy.value} (session {result.session_id}), "
                              f"{total} history tokens re-prefilled"))
    return {"label": label, "backend": base.backend.value, "runs": runs}


def run_demo(db: str, out_dir: Path, seed: int, as_json: bool) -> int:
    """Run both parts (the real one when the shipped model is present), print their turn
    tables and graph paths; returns the exit status."""
    if out_dir.exists() and not out_dir.is_dir():  # refused before anything is recorded
        raise OutputPathError(f"--out-dir {out_dir} is a file, not a folder for the graphs")
    parts = []
    for label, base in PARTS:
        if base.backend.value == "torch" and importlib.util.find_spec("torch") is None:
            sys.stderr.write(f"specledger demo: skipping '{label}': it needs the engine "
                             "(torch is not installed): pip install 'specledger[engine]'\n")
            continue
        parts.append(_part(label, base, db, out_dir, seed, as_json))
    if as_json:
        output.emit_json({"db": db, "parts": parts})
        return 0
    for part in parts:
        legacy, truncate = part["runs"]
        output.console.print(
            f"{part['label']}: legacy re-prefilled {legacy['reprefill_tokens']} tokens of "
            f"history, truncate {truncate['reprefill_tokens']}. Graphs: {legacy['graph']}, "
            f"{truncate['graph']}")
    output.console.print(f"Inspect: specledger sessions --db {db}; specledger show N --db {db}")
    return 0
