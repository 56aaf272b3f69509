"""`specledger whatif SESSION --profile P [--set draft_max=N]`: a recorded or imported
session's acceptance pattern (its rounds: context, drafts, kept drafts) replayed through
profile P's cost model (engine/sim/forecast.py): the decode tokens/s it predicts for plain
decoding and for the same speculation with llama.cpp's checkpoints in host memory (its
default), on the device (the on-device flag), and with per-position states (`n_rs_seq`).
A profile fitted by `specledger calibrate` carries what its log measured (its reach:
adapters/llama/calibration/reach.py); a mode whose forwards, drafter, checkpoints or per-position
states lie beyond it is marked as an extrapolation, with the reasons.
"""

import argparse
from typing import Any

from engine.sim.forecast import MTP_DRAFT_SHARE
from specledger.cli.options import add_common
from specledger.errors import UsageError

SETTABLE = ("draft_max",)


def add_parser(sub: Any) -> None:
    """The `whatif` subcommand."""
    p = sub.add_parser("whatif", help="a session's acceptance pattern on another machine's "
                                      "profile: predicted tok/s, plain and speculative")
    p.add_argument("session", type=int, help="a recorded or imported session's id")
    p.add_argument("--profile", required=True,
                   help="a cost profile: a name (an unknown one lists the known ones) or "
                        "a .json file")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", default=[],
                   help="draft_max=N: replay as if drafts were capped at N (repeatable)")
    p.add_argument("--draft-share", type=float, default=None,
                   help="drafting cost per drafted token as a share of a one-token forward "
                        f"(default: {MTP_DRAFT_SHARE} for an MTP drafter, else 0)")
    add_common(p)
    p.set_defaults(run=run)


def settings(pairs: list[str]) -> dict[str, int]:
    """`--set` pairs as settings (only `SETTABLE` keys, non-negative integers)."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or key not in SETTABLE:
            raise UsageError(f"--set {pair}: expected one of {', '.join(SETTABLE)}=N")
        if not value.isdigit():
            raise UsageError(f"--set {pair}: {key} must be a non-negative integer")
        out[key] = int(value)
    return out


def run(args: argparse.Namespace) -> int:
    """Read the session's rounds, replay them under the profile, print the forecast."""
    from engine.errors import ConfigError
    from engine.sim.costs import get_profile
    from engine.sim.forecast import forecast, recut
    from eventlog import get_session, open_db
    from eventlog.reader import scan_events
    from fsm.states import Trigger
    from specledger.views import output
    from specledger.views.whatif import (
        document,
        llama_names,
        mode_outside,
        print_document,
        profile_reach,
        session_rounds,
    )

    profile = get_profile(args.profile)
    cut = settings(args.set).get("draft_max")
    engine = open_db(args.db, create=False)
    info = get_session(engine, args.session)
    rounds = session_rounds(scan_events(engine, args.session,
                                        triggers=(Trigger.VERIFY, Trigger.DECODE,
                                                  Trigger.COMMIT)))
    if not rounds:
        raise ConfigError(f"session {args.session} has no committed rounds to replay")
    if cut is not None:
        largest = max(r.drafted for r in rounds)
        if cut > largest:
            raise UsageError(f"--set draft_max={cut}: session {args.session} never drafted "
                             f"more than {largest}; drafts it never made cannot be replayed")
        rounds = recut(rounds, cut)
    drafter = str(info.config.get("drafter") or "")
    share = args.draft_share if args.draft_share is not None else (
        MTP_DRAFT_SHARE if "mtp" in drafter else 0.0)
    if share < 0:
        raise UsageError(f"--draft-share {share}: must be >= 0")
    reach = profile_reach(args.profile)
    beyond = None if reach is None else mode_outside(reach, rounds, llama_names(drafter))
    doc = document(args.session, profile, rounds, forecast(profile, rounds, share), share,
                   cut, beyond)
    if args.json:
        output.emit_json(doc)
    else:
        print_document(doc)
    return 0
