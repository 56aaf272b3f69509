"""A calibration fit presented: the document `specledger calibrate` prints as JSON, and as
text (terms with their spread, residuals, reach, predictions)."""

from pathlib import Path
from typing import Any

from adapters.llama.calibration.clock import LogClock, log_clock
from adapters.llama.calibration.fit import LogFit, Term, predict_tok_s
from adapters.llama.calibration.reach import Reach, outside, reach_of
from adapters.llama.log.sources import read_log
from specledger.views import output

_STATUS = {"fitted": "fitted", "bound": "fitted at 0 (bound)", "absent": "not in the log",
           "unseparated": "not separable: fixed at 0",
           "derived": "derived (a drafter the log never ran)"}


def term_row(t: Term) -> dict[str, Any]:
    """A term as the JSON output gives it (seconds)."""
    return {"term": t.name, "value_s": t.value, "spread_s": t.spread, "status": t.status,
            "carried_by": list(t.carried_by), "source": t.source}


def prediction(fit: LogFit, reach: Reach, path: Path) -> dict[str, Any]:
    """Another log's decode tok/s as measured and as `fit` predicts it from its rounds,
    and why the prediction is outside the fit's reach (empty: inside)."""
    clock = log_clock(read_log(path), str(path))
    measured, predicted = predict_tok_s(fit, clock)
    return {"log": str(path), "measured_tok_s": measured, "predicted_tok_s": predicted,
            "error": predicted / measured - 1,
            "outside": [{"beyond": w.beyond.value, "clause": w.clause}
                        for w in outside(reach, clock)]}


def document(path: Path, clock: LogClock, fit: LogFit) -> dict[str, Any]:
    """What `--json` prints."""
    measured, predicted = predict_tok_s(fit, clock)
    reach = reach_of(clock)
    return {"log": str(path), "build": clock.build, "tasks": len(clock.tasks),
            "segments": len(clock.segments), "prompt_forwards": len(clock.chunks),
            "overlapping_tasks": clock.overlapping, "untimed_tasks": clock.untimed,
            "state_bytes": clock.state_bytes, "graph_nodes": clock.graph_nodes,
            "n_rs_seq": clock.n_rs_seq, "terms": [term_row(t) for t in fit.terms.values()],
            "knots": list(fit.curve.knots), "level": fit.level,
            "residuals": vars(fit.residuals) if fit.residuals else None,
            "reach": reach.to_dict(), "reach_text": reach.describe(),
            "decode_tok_s": {"log": measured, "fit": predicted},
            "eval_s": sum(t.eval_s for t in clock.tasks),
            "segments_s": sum(s.seconds for s in clock.segments)}


def print_document(doc: dict[str, Any]) -> None:
    """The fit's document as text: its terms, residuals, reach and predictions."""
    c = output.console
    c.print(f"{doc['log']} ({doc['build'] or 'build not logged'}): {doc['tasks']} request(s), "
            f"{doc['segments']} timed rounds, {doc['prompt_forwards']} prompt forward(s)"
            + (f"; {doc['overlapping_tasks']} request(s) left out (slots ran at once)"
               if doc["overlapping_tasks"] else ""), markup=False, highlight=False)
    c.print(f"  measured (the fit's reach): {doc['reach_text']}", markup=False, highlight=False)
    if doc["graph_nodes"]:
        c.print(f"  target graph: {doc['graph_nodes']} nodes (n_rs_seq {doc['n_rs_seq']}): "
                "launch_s and rebuild_s are its nodes, charged per node on another graph")
    for t in doc["terms"]:
        spread = "?" if t["spread_s"] is None else f"{1e3 * t['spread_s']:.4f}"
        value = (f"{1e3 * t['value_s']:.4f} ms ± {spread}"
                 if t["status"] in ("fitted", "bound", "derived") else "-")
        carried = f" (carried by {', '.join(t['carried_by'])})" if t["carried_by"] else ""
        source = f": {t['source']}" if t["source"] else ""
        c.print(f"  {t['term']:<34} {value:<26} {_STATUS[t['status']]}{carried}{source}",
                markup=False, highlight=False)
    r = doc["residuals"]
    if r is not None:
        c.print(f"  residuals: {r['rows']} rows, RMS {100 * r['rms']:.1f}%, median "
                f"|{100 * r['median_abs']:.1f}%|, max |{100 * r['max_abs']:.1f}%|"
                + (f", {r['dropped']} stall(s) dropped ({1e3 * r['stall_s']:.1f} ms beyond "
                   "the fit)" if r["dropped"] else ""))
    c.print(f"  the log's decode took {doc['level']:.3f}x what its fitted rounds charge "
            "(stalls of the machine): every prediction is charged the same")
    tok = doc["decode_tok_s"]
    c.print(f"  decode: {tok['log']:.1f} tok/s in the log, {tok['fit']:.1f} as fitted")
    for p in doc.get("predictions", []):
        where = ("outside the fit's reach: " + "; ".join(w["clause"] for w in p["outside"])
                 if p["outside"] else "inside the fit's reach")
        c.print(f"  {p['log']}: {p['measured_tok_s']:.1f} tok/s in the log, "
                f"{p['predicted_tok_s']:.1f} predicted ({100 * p['error']:+.1f}%), {where}",
                markup=False, highlight=False)
