"""The README is an executable contract: every command its quick start and CLI sections
show runs verbatim in an empty directory, and its synopsis lists exactly `run`'s flags."""

import argparse
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from specledger.cli import build_parser
from specledger.run_flags import run_flag_names

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
_EXIT = re.compile(r"\(exit (\d+)\b")


def _section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end if end > 0 else len(README)]


def _blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def _commands(title: str) -> list[tuple[str, int]]:
    """(command, expected exit status) for each line of the section's sh blocks; a comment
    saying '(exit N)' sets the status."""
    out = []
    for block in _blocks(_section(title), "sh"):
        for line in block.splitlines():
            command, _, comment = line.partition("#")
            if command.strip():
                found = _EXIT.search(comment)
                out.append((command.strip(), int(found.group(1)) if found else 0))
    return out


def _specledger() -> list[str]:
    script = Path(sys.executable).parent / "specledger"
    return [str(script)] if script.exists() else [sys.executable, "-m", "specledger"]


def test_quick_start_names_make_targets_that_exist() -> None:
    commands = _commands("Quick start")
    assert [c for c, _ in commands] == ["make demo", "make test"]
    makefile = (ROOT / "Makefile").read_text()
    for command, _ in commands:
        target = command.split()[1]
        assert re.search(rf"^{target}:", makefile, flags=re.M), target


def test_cli_walkthrough_runs_verbatim_in_an_empty_directory(tmp_path: Path) -> None:
    commands = _commands("CLI")
    assert len(commands) >= 10
    env = {k: v for k, v in os.environ.items() if k != "SPECLEDGER_DB"}
    for command, status in commands:
        argv = shlex.split(command)
        assert argv[0] == "specledger", command
        r = subprocess.run([*_specledger(), *argv[1:]], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=300, check=False)
        assert r.returncode == status, (command, r.returncode, r.stderr[-2000:])
        assert "Traceback" not in r.stdout + r.stderr, (command, r.stderr[-2000:])
        if "--out" in argv:  # the file, or the results folder, the command says it writes
            produced = tmp_path / argv[argv.index("--out") + 1]
            assert produced.exists(), command
            assert any(produced.iterdir()) if produced.is_dir() else produced.stat().st_size
    assert (tmp_path / "specledger.db").stat().st_size > 0
    assert (tmp_path / "bench-results" / "goals.md").exists()


def test_the_log_section_runs_verbatim_in_an_empty_directory(tmp_path: Path) -> None:
    commands = _commands("Read the log you have")
    assert commands[0][0].startswith("specledger import llama-server shipped:")
    assert any(c.startswith("specledger import vllm shipped:") for c, _ in commands)
    outputs = []
    for command, status in commands:
        r = subprocess.run([*_specledger(), *shlex.split(command)[1:]], cwd=tmp_path,
                           capture_output=True, text=True, timeout=300, check=False)
        assert r.returncode == status, (command, r.returncode, r.stderr[-2000:])
        assert "Traceback" not in r.stdout + r.stderr, command
        outputs.append(r.stdout)
    # What the section quotes is what the postmortem says.
    quoted = _blocks(_section("Read the log you have"), "")[-1]
    said = " ".join(" ".join(outputs).split())
    for finding in re.findall(r"^(?:error|warning) (\w+)", quoted, flags=re.M):
        assert finding in said, finding
    assert "130,842 tokens of the 131,072 cells" in said


def test_synopsis_lists_exactly_the_run_flags() -> None:
    synopsis = _blocks(_section("CLI"), "text")
    assert len(synopsis) == 1
    lines = synopsis[0].splitlines()
    assert lines[0].startswith("specledger run")
    # `run`'s entry: its first line and the indented lines that continue it.
    end = next((i for i, ln in enumerate(lines[1:], 1) if not ln.startswith(" ")), len(lines))
    listed = re.findall(r"(--[a-z][a-z-]*)", " ".join(lines[:end]))
    assert sorted(listed) == sorted(run_flag_names())
    assert len(listed) == len(set(listed))


def _commands_of_the_cli() -> list[str]:
    sub = next(a for a in build_parser()._actions
               if isinstance(a, argparse._SubParsersAction))
    return sorted(sub.choices)


@pytest.mark.parametrize("command", _commands_of_the_cli())
def test_synopsis_shows_every_command(command: str) -> None:
    assert re.search(rf"^specledger {command}\b", _blocks(_section("CLI"), "text")[0],
                     flags=re.M)


_LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")


def _anchors(markdown: str) -> set[str]:
    """GitHub's anchors of a markdown file's headings."""
    return {"#" + re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.*)$", markdown, flags=re.M)}


@pytest.mark.parametrize("page", ["README.md", *sorted(
    str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))])
def test_every_relative_link_leads_somewhere(page: str) -> None:
    """The README sends readers to docs/ for everything long: a moved section or a renamed
    heading must not leave a link pointing at nothing."""
    source = ROOT / page
    for target, anchor in _LINK.findall(source.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        path = (source.parent / target).resolve()
        assert path.exists(), f"{page}: {target}"
        if anchor and path.suffix == ".md":
            assert anchor in _anchors(path.read_text()), f"{page}: {target}{anchor}"
