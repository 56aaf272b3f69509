"""`specledger calibrate LOG|SESSION [--out PROFILE.json] [--predict LOG ...]`: the sim's
cost terms fitted from one llama-server -v log's own clock (a file, or the log a recorded
or imported session came from), each term with its spread, the residuals, the terms the
log could not separate, and its reach: what the log measured (adapters/llama/calibration/reach.py);
with `--out`, the profile the sim runs with (`--profile FILE.json`, its reach beside it for
`whatif`); with `--predict`, other logs' decode tokens/s from their own rounds, each
marked where it needs what the fit log never measured.

Any log of a -v server fits; a log holds only the costs its server paid, so `RECIPE` is
the server to log on one's own machine for a reach as wide as one log gives
(specbench/calibration/llama/recipe.py says why).
"""

import argparse
from pathlib import Path
from typing import Any

from adapters.llama.calibration.clock import LogClock, log_clock
from adapters.llama.calibration.fit import LogFit, Term, fit_log, predict_tok_s, to_profile
from adapters.llama.calibration.reach import Reach, outside, reach_of
from adapters.llama.log.sources import read_log
from engine.errors import ConfigError
from engine.files import check_target
from engine.sim.costs import save_profile
from eventlog import get_session, open_db
from specledger import output

_STATUS = {"fitted": "fitted", "bound": "fitted at 0 (bound)", "absent": "not in the log",
           "unseparated": "not separable: fixed at 0",
           "derived": "derived (a drafter the log never ran)"}


RECIPE = """\
the log to fit, on your machine (llama-server 0.3.36 or later, a model with an MTP head):

  llama-server -m MODEL.gguf -v --log-timestamps --log-prefix --log-file calib.log \\
      --spec-type draft-mtp --spec-draft-n-max 8 --spec-draft-p-min 0.4
  (send it requests of your workload, then stop it)
  specledger calibrate calib.log --out my-box.json

Any -v log fits, and the fit says what it measured (its reach): the batch sizes of its
forwards, its drafters, checkpoints, plain and speculative rounds, its graph. A
prediction (--predict, whatif) that needs more is marked as an extrapolation. Requests
that continue a conversation (the client sends the history back) give prompt forwards of
many sizes; --spec-draft-p-min makes the MTP head stop drafting at its first unsure
token, so one log holds plain rounds and verify batches of every size up to
--spec-draft-n-max (set it to the largest draft you will predict) beside the head's own
cost. This server's forwards also copy the MTP head's per-position states (n_rs_seq):
the log prints its graph's nodes, and the profile charges a server keeping another
number (none without a drafter) the forward's fixed cost per node of its graph, marked."""


def add_parser(sub: Any) -> None:
    """The `calibrate` subcommand."""
    p = sub.add_parser("calibrate", help="fit a sim profile from a llama-server -v log",
                       description="Fit the sim's cost terms from one llama-server -v log.",
                       epilog=RECIPE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("source", help="a llama-server log file (plain or gzip, with -v and "
                                  "timestamps), or the id of a session recorded from one")
    p.add_argument("--out", type=Path, default=None,
                   help="write the fitted profile here (a .json file; its stem names it)")
    p.add_argument("--predict", type=Path, action="append", default=[], metavar="LOG",
                   help="another -v log of the same machine: its decode tok/s predicted "
                        "from its rounds, marked where outside the fit's reach (repeatable)")


def _log_path(source: str, db: str) -> Path:
    """The log a source names: a file, else a session's recorded log."""
    path = Path(source)
    if path.is_file() or not source.isdigit():
        return path
    info = get_session(open_db(db, create=False), int(source))
    logged = (info.config.get("source") or {}).get("path")
    if not logged:
        raise ConfigError(f"session {source} was not recorded from a llama-server log "
                          f"(backend {info.backend}): calibrate needs one")
    if not Path(logged).is_file():
        raise ConfigError(f"session {source}'s log {logged} is gone: pass the log file")
    return Path(logged)


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


def _print(doc: dict[str, Any]) -> None:
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


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Read the log, fit, print the terms; write the profile with --out."""
    path = _log_path(args.source, args.db)
    if args.out is not None:
        if args.out.suffix != ".json":
            raise ConfigError(f"--out {args.out}: a profile is a .json file")
        check_target(args.out)
    clock = log_clock(read_log(path), str(path))
    fit = fit_log(clock)
    doc = document(path, clock, fit)
    if args.predict:
        reach = reach_of(clock)
        doc["predictions"] = [prediction(fit, reach, p) for p in args.predict]
    if args.out is not None:
        build = clock.build or "build not logged"
        desc = (f"fitted by `specledger calibrate` from {path.name} ({build}): "
                f"{len(clock.segments)} rounds of {len(clock.tasks)} request(s); checkpoint "
                "restores charged as saves, drafting not charged")
        profile = to_profile(fit, args.out.stem, desc, clock)
        doc["profile"] = str(save_profile(profile, args.out.parent, {"calibrate": doc}))
    if args.json:
        output.emit_json(doc)
    else:
        _print(doc)
        if args.out is not None:
            output.console.print(f"wrote {doc['profile']}")
    return 0
