"""The real SGLang logs users published (../shared/real-logs/sglang beside the checkout, or
`SPECLEDGER_SGLANG_LOGS`): read from there, never copied into the repository."""

import os
from pathlib import Path

import pytest


def sglang_corpus() -> Path:
    """The folder of real SGLang logs."""
    named = os.environ.get("SPECLEDGER_SGLANG_LOGS")
    if named:
        return Path(named)
    return Path(__file__).resolve().parents[4] / "shared" / "real-logs" / "sglang"


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The corpus folder; a checkout without it fails, naming where it looked."""
    folder = sglang_corpus()
    assert folder.is_dir(), f"the SGLang real-log corpus is missing at {folder}"
    return folder
