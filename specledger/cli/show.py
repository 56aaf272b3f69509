"""`specledger show SESSION`: a session's summary line, the llama.cpp build it ran (when
one did), and its turns."""

import argparse
from typing import Any

from specledger.cli.options import add_common


def add_parser(sub: Any) -> None:
    """The `show` command."""
    p = sub.add_parser("show", help="a session's summary and turns")
    p.add_argument("session", type=int)
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """`specledger show SESSION`."""
    from adapters.llama.builds.exposed import build_exposure
    from eventlog import get_session, open_db
    from eventlog.series import SERIES
    from specledger.api import session_turns
    from specledger.views import output
    from specledger.views.series import show_series

    engine = open_db(args.db, create=False)
    info = get_session(engine, args.session)
    if info.config.get("series") == SERIES:
        return show_series(engine, info, args.json)
    table = session_turns(engine, args.session)
    turns, partial, profiles = table.ended, table.partial, table.profiles
    exposure = build_exposure(info.config)
    if args.json:
        doc = {"session": output.session_json(info),
               "turns": output.turn_rows(turns, profiles),
               "partial_turns": output.turn_rows(partial, profiles)}
        if exposure is not None:
            doc["llama_build"] = exposure.to_dict()
        output.emit_json(doc)
        return 0
    cfg = info.config
    slots = cfg.get("slots") or 1
    # A session recorded before the schedule existed ran its slots one after another.
    shared = f", {slots} slots {cfg.get('schedule', 'sequential')}" if slots > 1 else ""
    output.console.print(
        f"session {info.id}: [bold]{info.status}[/], {info.events} events, backend "
        f"{info.backend}, strategy {cfg.get('strategy')}, eog {cfg.get('eog_policy')}, "
        f"replay {cfg.get('replay_policy')}, drafter {cfg.get('drafter')} "
        f"(k={cfg.get('draft_max')}){shared}, seed {cfg.get('seed')}, "
        f"code {info.code_version}")
    for line in exposure.lines() if exposure is not None else ():
        output.console.print(line, markup=False, highlight=False)
    output.console.print(output.turn_table(turns, "turns", profiles, partial))
    return 0
