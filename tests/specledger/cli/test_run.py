"""`specledger run --backend sim --profile P`: each turn's plain-decoding tokens/s beside
the speculative run's, and a line saying so where speculation loses on that profile."""

import json
from pathlib import Path

import pytest

from engine.sim.costs import get_profile
from specledger.cli.main import main

PROFILE = "rtx3090-qwen3.5-27b-q4-llama"  # host checkpoints: ngram-mod drafts little here
ARGS = ["run", "--backend", "sim", "--profile", PROFILE, "--drafter", "ngram-mod",
        "--strategy", "checkpoint", "--turns", "2", "--max-answer-tokens", "64"]


def test_each_turn_has_its_plain_tok_s(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                       ) -> None:
    capsys.readouterr()
    assert main([*ARGS, "--db", str(tmp_path / "l.db"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    profile = get_profile(PROFILE)
    assert len(doc["plain_tps"]) == len(doc["turns"]) == 2
    for r, plain in zip(doc["turns"], doc["plain_tps"], strict=True):
        plain_s = profile.plain_decode_s(r["prompt_tokens"], r["generated_tokens"] - 1)
        assert plain == pytest.approx(r["generated_tokens"] / plain_s)
        assert plain > r["decode_tps"]  # checkpoints every round, few drafts


def test_the_table_says_speculation_loses(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main([*ARGS, "--db", str(tmp_path / "l.db")]) == 0
    out = capsys.readouterr().out
    assert "plain" in out and f"speculation loses on {PROFILE}" in out
