"""`specledger run`: run a configuration and record it as a session; the flags are
`RunConfig`'s fields (cli/run_flags.py)."""

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from specledger.cli.options import add_common
from specledger.cli.run_flags import add_run_flags, config_from_args

if TYPE_CHECKING:
    from engine.config import RunConfig
    from fsm.turn_metrics import TurnMetrics


def add_parser(sub: Any) -> None:
    """The `run` command: one flag per `RunConfig` field."""
    p = sub.add_parser("run", help="run and record a session")
    add_run_flags(p)
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """`specledger run`: the observed engines run through their own runners; ours prints
    its turns, beside plain decoding's speed on the sim."""
    from engine.config import BackendKind
    from eventlog import open_db
    from specledger.api import run_session, session_turns
    from specledger.views import output

    config = config_from_args(args)
    if config.backend is BackendKind.LLAMA:
        from specledger.runs import llama

        return llama.run_and_print(config, args.db, args.json)
    if config.backend is BackendKind.VLLM:
        from specledger.runs import vllm

        return vllm.run_and_print(config, args.db, args.json)
    label = f"{config.strategy}/{config.eog_policy}"
    with output.progress_bar(config, label, not args.json) as progress:
        result = run_session(config, args.db, progress=progress)
    profiles = session_turns(open_db(args.db, create=False), result.session_id).profiles
    plain = plain_tps(config, result.turns)
    if args.json:
        doc = {"session": result.session_id, "events": result.events,
               "turns": output.turn_rows(result.turns, profiles)}
        if plain is not None:  # beside the turns, which `show` prints alike
            doc["plain_tps"] = plain
        output.emit_json(doc)
        return 0
    title = (f"session {result.session_id}: {config.backend} {config.strategy} "
             f"eog={config.eog_policy} drafter={config.drafter}")
    if config.slots > 1:
        title += f" slots={config.slots} schedule={config.schedule}"
    output.console.print(output.turn_table(result.turns, title, profiles, plain=plain))
    if plain is not None and any(m.decode_tps < p for m, p in zip(result.turns, plain,
                                                                   strict=True)):
        output.console.print(f"[bold red]speculation loses on {config.profile}[/]: plain "
                             "decoding is faster where the plain tok/s is red")
    output.console.print(f"{result.events} events recorded in {args.db}")
    return 0


def plain_tps(config: "RunConfig", turns: "Sequence[TurnMetrics]") -> list[float] | None:
    """On the sim, each turn's tokens/s decoded plainly under the session's profile (the
    same answer, one forward per token); None on a measured backend."""
    from engine.config import BackendKind

    if config.backend is not BackendKind.SIM:
        return None
    from engine.sim.costs import get_profile

    profile = get_profile(config.profile)
    seconds = [profile.plain_decode_s(m.prompt_tokens, max(0, m.generated_tokens - 1))
               for m in turns]
    return [m.generated_tokens / s if s > 0 else 0.0 for m, s in zip(turns, seconds, strict=True)]
