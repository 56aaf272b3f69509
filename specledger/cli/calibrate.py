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

from specledger.cli.options import add_common

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
    add_common(p)
    p.set_defaults(run=run)


def _log_path(source: str, db: str) -> Path:
    """The log a source names: a file, else a session's recorded log."""
    path = Path(source)
    if path.is_file() or not source.isdigit():
        return path
    from engine.errors import ConfigError
    from eventlog import get_session, open_db

    info = get_session(open_db(db, create=False), int(source))
    logged = (info.config.get("source") or {}).get("path")
    if not logged:
        raise ConfigError(f"session {source} was not recorded from a llama-server log "
                          f"(backend {info.backend}): calibrate needs one")
    if not Path(logged).is_file():
        raise ConfigError(f"session {source}'s log {logged} is gone: pass the log file")
    return Path(logged)


def run(args: argparse.Namespace) -> int:
    """Read the log, fit, print the terms; write the profile with --out."""
    from adapters.llama.calibration.clock import log_clock
    from adapters.llama.calibration.fit import fit_log, to_profile
    from adapters.llama.calibration.reach import reach_of
    from adapters.llama.log.sources import read_log
    from engine.errors import ConfigError
    from engine.files import check_target
    from engine.sim.costs import save_profile
    from specledger.views import output
    from specledger.views.calibration import document, prediction, print_document

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
        print_document(doc)
        if args.out is not None:
            output.console.print(f"wrote {doc['profile']}")
    return 0
