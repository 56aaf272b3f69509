"""specledger: a flight recorder, replayer and simulator for speculative decoding on
hybrid (attention + recurrent) language models.

The public facade is small: `run_session` runs a configuration into a log, and
`turn_table` reads a session's per-turn metrics back. It is loaded on first use, so that
the `specledger` command (`specledger/entry.py`) starts before the engine and the ledger
are imported.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from specledger.api import RunResult, code_version, run_session, turn_table

__all__ = ["RunResult", "code_version", "run_session", "turn_table"]


def __getattr__(name: str) -> Any:
    """The facade's names, from `specledger.api` on first use."""
    if name in __all__:
        from specledger import api

        return getattr(api, name)
    raise AttributeError(f"module 'specledger' has no attribute {name!r}")
