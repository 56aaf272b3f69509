"""`make demo`: the #28049 amplification on a Qwen3.5-27B-like profile.

Two 3-turn conversations that differ only in the EOG policy. `legacy` commits the whole
accepted block and leaves stray tokens behind EOG, so the next prompt no longer extends
the slot, the recurrent state falls back to the checkpoint before the generation header
and the whole previous answer plus the template tokens are prefilled again. `truncate`
cuts the block at EOG first: f_keep = 1.0 and no history is prefilled twice.
"""

from pathlib import Path

from engine.config import EogPolicy, RunConfig
from eventlog import iter_events, open_db
from specledger import output
from specledger.api import run_session
from viz import GraphFormat, fsm_graph, render

DEMO_CONFIG = RunConfig(
    profile="qwen3.5-27b-h200",
    drafter="synthetic",
    acceptance=0.9,
    draft_max=8,
    turns=3,
    prompt_tokens=2048,
    question_tokens=48,
    answer_tokens=1500,
)


def run_demo(db: str, out_dir: Path, seed: int, as_json: bool) -> int:
    """Run both policies, print their turn tables and graphs; returns the exit status."""
    docs = []
    for policy in (EogPolicy.LEGACY, EogPolicy.TRUNCATE):
        config = DEMO_CONFIG.replace(eog_policy=policy.value, seed=seed)
        result = run_session(config, db)
        engine = open_db(db, create=False)
        graph = render(fsm_graph(iter_events(engine, result.session_id)),
                       out_dir / f"session-{result.session_id}-{policy.value}-fsm.svg",
                       GraphFormat.SVG, f"session {result.session_id}: eog={policy.value}")
        total = sum(m.reprefill_tokens for m in result.turns)
        docs.append({"session": result.session_id, "eog_policy": policy.value,
                     "reprefill_tokens": total, "graph": str(graph),
                     "turns": output.turn_rows(result.turns)})
        if not as_json:
            output.console.print(output.turn_table(
                result.turns, f"eog={policy.value} (session {result.session_id}): "
                              f"{total} history tokens re-prefilled"))
    if as_json:
        output.emit_json({"db": db, "runs": docs})
        return 0
    legacy, truncate = docs
    output.console.print(
        f"legacy re-prefilled {legacy['reprefill_tokens']} tokens of history; truncate "
        f"{truncate['reprefill_tokens']}. Graphs: {legacy['graph']}, {truncate['graph']}")
    output.console.print(f"Inspect: specledger show {legacy['session']} --db {db}")
    return 0
