"""`specledger ...`: argument parsing, dispatch, and one-line errors."""

import argparse
import sys
from collections.abc import Sequence

from sqlalchemy.exc import SQLAlchemyError

from engine.config import BackendKind, EogPolicy, ReplayPolicy, RunConfig, Strategy
from eventlog import DEFAULT_DB
from fsm.errors import SpecledgerError
from specledger import bench_cmd, commands
from specledger.graphs import GraphKind
from specledger.scenarios import SCENARIOS
from viz import GraphFormat


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (exit 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        sys.exit(2)


def _common() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--db", default=DEFAULT_DB, help=f"path or SQLAlchemy URL ({DEFAULT_DB})")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    return p


def _run_options(p: argparse.ArgumentParser) -> None:
    d = RunConfig()
    # The real engine is the default; the sim stands in for hardware this machine lacks.
    p.add_argument("--backend", choices=[b.value for b in BackendKind],
                   default=BackendKind.TORCH.value)
    p.add_argument("--strategy", choices=[s.value for s in Strategy], default=d.strategy.value)
    p.add_argument("--eog-policy", choices=[e.value for e in EogPolicy],
                   default=d.eog_policy.value)
    p.add_argument("--replay-policy", choices=[r.value for r in ReplayPolicy],
                   default=d.replay_policy.value)
    p.add_argument("--drafter", default="",
                   help="none | synthetic | ngram-simple | ngram-map-k | ngram-mod | draft-model"
                        " | mtp, or a chain in order of precedence such as mtp,ngram-mod (default: "
                        "synthetic on sim, mtp on torch)")
    p.add_argument("--draft-max", type=int, default=d.draft_max)
    p.add_argument("--draft-min", type=int, default=d.draft_min,
                   help="drop shorter drafts (n-gram drafters)")
    p.add_argument("--ngram-n", type=int, default=d.ngram_n, help="n-gram key length")
    p.add_argument("--ngram-min-hits", type=int, default=d.ngram_min_hits,
                   help="ngram-map-k: repetitions a key needs before it drafts")
    p.add_argument("--acceptance", type=float, default=d.acceptance,
                   help="synthetic drafter: chance that each draft is the target's token")
    p.add_argument("--turns", type=int, default=d.turns)
    p.add_argument("--slots", type=int, default=d.slots, help="concurrent conversations")
    p.add_argument("--prompt-tokens", type=int, default=d.prompt_tokens,
                   help="first user message (sim)")
    p.add_argument("--question-tokens", type=int, default=d.question_tokens,
                   help="later user messages (sim)")
    p.add_argument("--answer-tokens", type=int, default=d.answer_tokens,
                   help="answer length before EOG (sim)")
    p.add_argument("--max-answer-tokens", type=int, default=d.max_answer_tokens,
                   help="cut an answer without EOG here (0: 4x answer-tokens on sim, 512 on "
                        "torch)")
    p.add_argument("--eog-prob", type=float, default=d.eog_prob,
                   help="chance of an early EOG per token (sim)")
    p.add_argument("--tie-flip-rate", type=float, default=d.tie_flip_rate,
                   help="share of near-tie positions whose argmax depends on batch shape (sim)")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--profile", default=d.profile, help="sim cost profile")
    p.add_argument("--model", default=d.model, help="torch: target checkpoint directory")
    p.add_argument("--draft-model", default=d.draft_model,
                   help="torch: draft checkpoint directory (drafter draft-model)")
    p.add_argument("--draft-checkpoints", choices=["keep", "discard"],
                   default=d.draft_checkpoints,
                   help="draft-model checkpoints across requests (discard: PR 22521's bug)")
    p.add_argument("--temperature", type=float, default=d.temperature,
                   help="0: greedy verification; > 0: lossless rejection sampling")
    p.add_argument("--top-k", type=int, default=d.top_k)
    p.add_argument("--kernels", choices=["auto", "torch", "triton"], default=d.kernels,
                   help="torch: GDN state kernels (auto: Triton on CUDA, torch references "
                        "elsewhere); the resolved choice is recorded with the session")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default=d.device,
                   help="torch: where the models run (auto: CUDA when torch sees one); the "
                        "resolved device is recorded with the session")
    p.add_argument("--top-p", type=float, default=d.top_p)
    p.add_argument("--ctx-checkpoints", type=int, default=d.ctx_checkpoints)
    p.add_argument("--ctx-checkpoint-every", type=int, default=d.ctx_checkpoint_every)
    p.add_argument("--livelock-guard", type=int, default=d.livelock_guard,
                   help="restores at one position that count as a livelock (0: off)")
    p.add_argument("--no-audit", action="store_true", help="skip the state-truth audit")
    p.add_argument("--strict", action="store_true", help="stop at the first violation")


def _tolerance_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tolerance", type=float, default=0.0,
                   help="relative tolerance for float fields (default 0: exact)")
    p.add_argument("--ignore-digests", action="store_true",
                   help="skip state digests (runs on different devices)")


def build_parser() -> argparse.ArgumentParser:
    """The whole command line."""
    common = _common()
    p = _Parser(prog="specledger", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = sub.add_parser("run", parents=[common], help="run and record a session")
    _run_options(run)
    sub.add_parser("sessions", parents=[common], help="list recorded sessions")
    show = sub.add_parser("show", parents=[common], help="a session's summary and turns")
    show.add_argument("session", type=int)
    replay = sub.add_parser("replay", parents=[common],
                            help="project a session's state, or re-execute it (--rerun)")
    replay.add_argument("session", type=int)
    replay.add_argument("--at", type=int, default=None, help="fold events through this seq")
    replay.add_argument("--rerun", action="store_true",
                        help="run the session again and compare every event with the log")
    replay.add_argument("--backend", choices=[b.value for b in BackendKind], default=None,
                        help="--rerun on another backend (a counterfactual)")
    replay.add_argument("--set", action="append", metavar="KEY=VALUE",
                        help="--rerun with a setting changed (a counterfactual), repeatable")
    _tolerance_options(replay)
    diff = sub.add_parser("diff", parents=[common],
                          help="first divergent event and per-turn deltas of two sessions")
    diff.add_argument("a", type=int)
    diff.add_argument("b", type=int)
    _tolerance_options(diff)
    post = sub.add_parser("postmortem", parents=[common],
                          help="findings from the log; exit 1 on an error-level finding")
    post.add_argument("session", type=int)
    post.add_argument("--reference", type=int, default=None,
                      help="a plain (drafter none) session of the same conversation")
    post.add_argument("--fail-on", choices=["error", "warning"], default="error",
                      help="lowest severity that makes the exit status 1")
    graph = sub.add_parser("graph", parents=[common], help="draw a session's state graph")
    graph.add_argument("sessions", type=int, nargs="*", metavar="SESSION",
                       help="one session; two or more for --kind divergence; none for machine")
    graph.add_argument("--kind", choices=[k.value for k in GraphKind], default="fsm")
    graph.add_argument("--format", choices=[f.value for f in GraphFormat], default="svg")
    graph.add_argument("--out", default=None, help="file to write (default: session-N-KIND.EXT)")
    report = sub.add_parser("report", parents=[common],
                            help="one self-contained HTML file: graphs, metrics, findings")
    report.add_argument("sessions", type=int, nargs="+", metavar="SESSION")
    report.add_argument("--out", default=None, help="file to write (default: report-N.html)")
    scen = sub.add_parser("scenario", parents=[common],
                          help="record a session that reproduces a known bug, and its fix")
    scen.add_argument("name", choices=list(SCENARIOS))
    scen.add_argument("--backend", choices=[b.value for b in BackendKind], default="sim")
    scen.add_argument("--seed", type=int, default=1)
    scen.add_argument("--model", default=None, help="torch: target checkpoint directory")
    scen.add_argument("--draft-model", default=None, help="torch: draft checkpoint directory")
    scen.add_argument("--set", action="append", metavar="KEY=VALUE",
                      help="change the scenario's base settings (sizes, drafter), repeatable")
    bench_cmd.add_parser(sub, common)
    demo = sub.add_parser("demo", parents=[common], help="the #28049 amplification, shown")
    demo.add_argument("--out-dir", default="out/demo", help="where the graphs go")
    demo.add_argument("--seed", type=int, default=1)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        return commands.dispatch(args)
    except SpecledgerError as exc:
        sys.stderr.write(f"specledger: error: {exc}\n")
    except SQLAlchemyError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        sys.stderr.write(f"specledger: database error: {first}\n")
    except OSError as exc:
        sys.stderr.write(f"specledger: error: {exc}\n")
    except KeyboardInterrupt:
        sys.stderr.write("specledger: interrupted\n")
        return 130
    return 1
