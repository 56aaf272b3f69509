"""The CLI contract: JSON shapes scripts depend on, and one-line errors."""

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

import eventlog.unclosed
from specledger.cli import sessions
from specledger.cli.main import COMMANDS, DESCRIPTION, build_parser, main

SMALL = ["--backend", "sim", "--turns", "2", "--prompt-tokens", "64",
         "--question-tokens", "8", "--answer-tokens", "40"]


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> object:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def db(db_url: str) -> str:
    """A fresh ledger, on SQLite and on PostgreSQL."""
    return db_url


def test_run_sessions_show_replay_json(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    run = _json(capsys, "run", "--db", db, "--json", "--eog-policy", "legacy", *SMALL)
    assert set(run) >= {"session", "turns"}
    assert [t["turn"] for t in run["turns"]] == [1, 2]
    required = {"turn", "prompt_tokens", "generated_tokens", "drafted", "accepted",
                "kept_tokens", "f_keep", "reprefill_tokens", "restores"}
    assert all(required <= set(t) for t in run["turns"])
    sid = run["session"]

    sessions = _json(capsys, "sessions", "--db", db, "--json")
    assert sessions[0]["id"] == sid and sessions[0]["status"] == "finished"
    assert sessions[0]["events"] > 0

    show = _json(capsys, "show", str(sid), "--db", db, "--json")
    assert show["turns"] == run["turns"]

    replay = _json(capsys, "replay", str(sid), "--db", db, "--json")
    (slot,) = replay["slots"]
    assert set(slot) >= {"slot", "tokens", "position", "state", "digest"}
    assert slot["state"] == "done" and replay["seq"] == sessions[0]["events"]
    early = _json(capsys, "replay", str(sid), "--db", db, "--json", "--at", "5")
    assert early["seq"] == 5 and len(early["slots"][0]["tokens"]) <= len(slot["tokens"])


@pytest.mark.parametrize("fmt", ["svg", "png", "dot"])
def test_graph_formats(db: str, tmp_path: Path, fmt: str,
                       capsys: pytest.CaptureFixture[str]) -> None:
    sid = _json(capsys, "run", "--db", db, "--json", *SMALL)["session"]
    out = tmp_path / f"g.{fmt}"
    doc = _json(capsys, "graph", str(sid), "--db", db, "--format", fmt, "--out", str(out),
                "--json")
    assert doc["path"] == str(out)
    data = out.read_bytes()
    assert {"svg": b"<svg", "png": b"\x89PNG", "dot": b"digraph"}[fmt] in data[:400]
    if fmt == "dot":
        assert b"commit" in data and b"verify x" in data


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specledger", *argv], capture_output=True,
                          text=True, timeout=120, check=False)


def test_bad_input_is_one_line_and_nonzero(tmp_path: Path) -> None:
    db = str(tmp_path / "log.db")
    assert _cli("run", "--db", db, *SMALL, "--json").returncode == 0
    junk = tmp_path / "junk.db"
    junk.write_text("not a database at all " * 100)
    # (argv, exit status, text of the one line): 2 for the command line's shape, as
    # argparse's own errors; 1 for what the shape cannot tell (the database, the session).
    cases = [
        (("show", "99", "--db", db), 1, "no session 99"),
        (("replay", "99", "--db", db), 1, "no session 99"),
        (("sessions", "--db", str(tmp_path / "missing.db")), 1, "no database"),
        (("sessions", "--db", str(junk)), 1, "not a specledger database"),
        (("sessions", "--db", "nosuchdialect://x"), 1, ""),
        (("sessions", "--db", "postgresql+psycopg://nobody:pw@127.0.0.1:1/x"), 1,
         "cannot use postgresql+psycopg://nobody:***@127.0.0.1:1/x"),
        (("run", "--db", db, "--acceptance", "1.5"), 2, "--acceptance: 1.5 must be"),
        (("run", "--db", db, "--draft-max", "0"), 2, "--draft-max: 0 must be at least 1"),
        (("run", "--db", db, "--turns", "two"), 2, "--turns: 'two' is not an integer"),
        (("run", "--backend", "sim", "--db", db, "--profile", "nope"), 1, "unknown 'nope'"),
        (("run", "--db", db, "--strategy", "bogus"), 2, "invalid choice"),
        (("graph", "1", "--db", db, "--format", "gif"), 2, "invalid choice"),
        (("graph", "1", "2", "--db", db, "--kind", "fsm"), 2, "draws one session"),
        (("graph", "1", "--db", db, "--kind", "divergence"), 2, "two or more sessions"),
        (("replay", "1", "--db", db, "--at", "-5"), 2, "--at: -5 must be at least 0"),
        (("replay", "1", "--db", db, "--at", "999999"), 1, "--at 999999: session 1 has"),
        (("replay", "1", "--db", db, "--at", "3", "--rerun"), 2, "does not combine"),
        (("replay", "1", "--db", db, "--set", "seed=1"), 2, "add --rerun"),
        (("replay", "1", "--db", db, "--rerun", "--set", "seed"), 2, "expected key=value"),
        (("diff", "1", "1", "--db", db, "--tolerance", "-1"), 2, "--tolerance: -1"),
    ]
    for argv, status, needle in cases:
        r = _cli(*argv)
        assert r.returncode == status, (argv, r.returncode, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1, (argv, r.stderr)
        assert "Traceback" not in r.stderr and needle in lines[0], (argv, lines)


def test_what_only_the_data_tells_is_one_line_on_every_backend(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Nothing recorded yet: no SQLite file there is an error; an empty PostgreSQL database
    # is a ledger with no sessions yet (a new SQLite ledger too, `test_cli_faults.py`).
    sqlite = "://" not in db
    assert main(["sessions", "--db", db]) == (1 if sqlite else 0)
    assert main(["show", "1", "--db", db]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("specledger: error:")
    assert sqlite or "has no sessions yet" in err[-1], err
    _json(capsys, "run", "--db", db, "--json", *SMALL)
    for argv, needle in ((("show", "99"), "no session 99: known ids are 1..1"),
                         (("replay", "1", "--at", "999999"), "--at 999999: session 1 has")):
        assert main([*argv, "--db", db]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and needle in err[0], (argv, err)


def test_sessions_before_anything_is_recorded(tmp_path: Path) -> None:
    """A new user's first command, in an empty directory, with the default ledger."""
    r = subprocess.run([sys.executable, "-m", "specledger", "sessions"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0 and "no sessions yet" in r.stdout, r.stderr
    r = subprocess.run([sys.executable, "-m", "specledger", "sessions", "--json"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0 and json.loads(r.stdout) == []
    assert not (tmp_path / "specledger.db").exists()


@pytest.mark.parametrize("schedule", ["sequential", "batched"])
def test_run_and_show_name_how_several_slots_shared_the_target(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], schedule: str) -> None:
    db = f"sqlite:///{tmp_path / 'l.db'}"
    assert main(["run", "--db", db, *SMALL, "--slots", "2", "--schedule", schedule]) == 0
    assert f"slots=2 schedule={schedule}" in capsys.readouterr().out
    assert main(["show", "1", "--db", db]) == 0
    assert f"2 slots {schedule}" in " ".join(capsys.readouterr().out.split())
    assert main(["run", "--db", db, *SMALL]) == 0  # one slot: nothing to share
    assert "schedule=" not in capsys.readouterr().out


def test_help_says_what_the_tool_is(capsys: pytest.CaptureFixture[str]) -> None:
    """`specledger --help` opens with what specledger is, not how its CLI module works."""
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    first = out.split("\n\n")[1]  # the paragraph after the usage
    assert first.startswith("A flight recorder, replayer and postmortem for speculative "
                            "decoding")
    assert " ".join(first.split()) == DESCRIPTION
    assert "dispatch" not in out and "one-line errors" not in out


def test_every_command_is_its_own_module_and_runs_through_its_parser() -> None:
    """A command is registered once: its module's `add_parser` builds its parser, whose
    `run` default is that module's function."""
    parser = build_parser()
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    # a module is named as its command (`import_`: `import` is Python's)
    modules = {m.__name__.rsplit(".", 1)[1].rstrip("_"): m for m in COMMANDS}
    assert list(sub.choices) == list(modules)
    for name, child in sub.choices.items():
        assert child.get_default("run").__module__ == modules[name].__name__, name


# What the parser alone must not load: the libraries a command's work needs.
HEAVY = ("sqlalchemy", "rich", "networkx", "numpy", "torch", "graphviz")


def test_the_parser_loads_no_command_work() -> None:
    code = ("import sys\nfrom specledger.cli.main import build_parser\nbuild_parser()\n"
            f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.split() == []


def test_sessions_loads_neither_the_engine_nor_the_graphs(tmp_path: Path) -> None:
    code = ("import sys\nfrom specledger.cli.main import main\n"
            f"main(['sessions', '--db', {str(tmp_path / 'l.db')!r}])\n"
            "print('LOADED', ' '.join(m for m in ('networkx', 'numpy', 'torch', 'engine.session')"
            " if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.split("LOADED")[1].split() == []


def test_ctrl_c_inside_a_commands_imports_is_the_one_line(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """An interrupt inside an import may surface as another error (an interrupted
    `__set_name__` becomes a RuntimeError): still an interrupt, exit 130, no traceback."""

    def interrupted_import(args: argparse.Namespace) -> int:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise RuntimeError("Error calling __set_name__") from exc

    monkeypatch.setattr(sessions, "run", interrupted_import)
    monkeypatch.setattr(eventlog.unclosed, "_open", {})  # no other test's open sessions
    assert main(["sessions", "--db", "x.db"]) == 130
    assert capsys.readouterr().err == "specledger: interrupted\n"
