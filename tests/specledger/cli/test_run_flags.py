"""The parser: every subcommand's defaults, and `run`'s flags generated from RunConfig."""

import argparse
from dataclasses import fields

import pytest

from engine.config import RunConfig
from specledger.cli.main import build_parser
from specledger.cli.run_flags import config_from_args, run_flag_names


def _subparsers(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _defaults(sub: argparse.ArgumentParser) -> dict[str, object]:
    return {a.dest: a.default for a in sub._actions}


def test_every_subcommand_defaults_to_the_local_ledger() -> None:
    subs = _subparsers(build_parser())
    assert {"run", "sessions", "show", "replay", "diff", "postmortem", "graph", "report",
            "scenario", "demo", "bench"} <= set(subs)
    for name, sub in subs.items():
        if name == "llama":  # the build cache is no ledger: its commands take --json only
            for child in _subparsers(sub).values():
                assert "db" not in _defaults(child) and _defaults(child)["json"] is False
            continue
        expected = None if name == "bench" else "specledger.db"
        assert _defaults(sub)["db"] == expected, name
        assert _defaults(sub)["json"] is False, name


def test_parsed_commands_keep_their_own_db_default() -> None:
    p = build_parser()
    # Parsing bench first must not change the default of any later command (the bug of
    # a --db action shared through a parent parser).
    assert p.parse_args(["bench", "--quick"]).db is None
    assert p.parse_args(["sessions"]).db == "specledger.db"
    assert p.parse_args(["show", "1"]).db == "specledger.db"
    assert p.parse_args(["run", "--db", "x.db"]).db == "x.db"


def test_run_flags_are_the_config_fields_with_their_defaults() -> None:
    run = _subparsers(build_parser())["run"]
    dests = {a.dest for a in run._actions} - {"help", "db", "json"}
    assert dests == {f.name for f in fields(RunConfig)}
    args = build_parser().parse_args(["run"])
    config = config_from_args(args)
    defaults = RunConfig(backend="torch")
    assert config == defaults
    assert config.drafter == "mtp" and config.model == "shipped:target"


def test_flags_reach_the_config_typed() -> None:
    args = build_parser().parse_args(
        ["run", "--backend", "sim", "--draft-max", "3", "--acceptance", "0.25", "--no-audit",
         "--strict", "--kernels", "torch", "--eog-policy", "legacy", "--threads", "2"])
    config = config_from_args(args)
    assert (config.backend.value, config.draft_max, config.acceptance, config.audit,
            config.strict, config.kernels, config.eog_policy.value, config.threads) == (
        "sim", 3, 0.25, False, True, "torch", "legacy", 2)


@pytest.mark.parametrize("argv", [
    ["--draft-max", "65"], ["--draft-max", "0"], ["--top-p", "0"], ["--top-p", "1.5"],
    ["--acceptance", "-0.1"], ["--turns", "1.5"], ["--kernels", "cuda"], ["--threads", "0"],
])
def test_out_of_range_flags_are_usage_errors(argv: list[str],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["run", *argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and argv[0] in err[0]


def test_help_shows_every_generated_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--help"])
    text = capsys.readouterr().out
    for name in run_flag_names():
        assert name in text
