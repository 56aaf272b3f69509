"""`specledger diff A B [--tokens]`: the first divergent event of two sessions and their
per-turn deltas; token by token for sessions of different backends."""

import argparse
from typing import Any

from specledger.cli.options import add_common, add_tolerance, tolerance_from_args


def add_parser(sub: Any) -> None:
    """The `diff` command."""
    p = sub.add_parser("diff", help="first divergent event and per-turn deltas of two sessions")
    p.add_argument("a", type=int)
    p.add_argument("b", type=int)
    p.add_argument("--tokens", action="store_true",
                   help="compare the committed tokens, not every event (the default for "
                        "sessions of different backends)")
    add_tolerance(p)
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """0 when identical (timings aside; token by token for sessions of different backends
    or with --tokens), 1 when they differ."""
    from eventlog import get_session, open_db
    from eventlog.diff import DiffMode, diff_mode, diff_streams
    from eventlog.reader import scan_events
    from eventlog.token_diff import TOKEN_TRIGGERS
    from specledger.views import output
    from specledger.views.analysis import (
        divergence_json,
        print_divergence,
        print_token_diff,
        print_turn_deltas,
        token_diff_json,
        turn_deltas_json,
    )
    from specledger.views.token_text import decoders

    engine = open_db(args.db, create=False)
    info_a, info_b = get_session(engine, args.a), get_session(engine, args.b)
    mode = diff_mode(info_a, info_b, args.tokens)
    tol = tolerance_from_args(args)
    only = TOKEN_TRIGGERS if mode is DiffMode.TOKENS else None
    result = diff_streams(scan_events(engine, args.a, triggers=only),
                          scan_events(engine, args.b, triggers=only), tol, mode=mode)
    decode = decoders(info_a, info_b) if result.tokens is not None else (None, None)
    if args.json:
        output.emit_json({
            "a": args.a, "b": args.b, "mode": mode.value,
            "backends": {"a": info_a.backend, "b": info_b.backend},
            "identical": result.identical, "tolerance": tol.to_dict(),
            "compared": result.compared, "divergence": divergence_json(result.divergence),
            "tokens": (token_diff_json(result.tokens, decode)
                       if result.tokens is not None else None),
            "turns": turn_deltas_json(result.turns)})
    else:
        a, b = f"session {args.a}", f"session {args.b}"
        if result.tokens is not None:
            why = ("--tokens" if info_a.backend == info_b.backend
                   else f"backends {info_a.backend} and {info_b.backend}")
            output.console.print(f"compared token by token ({why})")
            print_token_diff(result.tokens, a, b, decode)
        else:
            print_divergence(result.divergence, f"sessions {args.a} and {args.b} agree on "
                                                f"all {result.compared} events")
        print_turn_deltas(result.turns, a, b, prompts=result.tokens is not None)
    return 0 if result.identical else 1
