"""specledger: a flight recorder, replayer and simulator for speculative decoding on
hybrid (attention + recurrent) language models.

The public facade is small: `run_session` runs a configuration into a log, and
`turn_table` reads a session's per-turn metrics back.
"""

from specledger.api import RunResult, code_version, run_session, turn_table

__all__ = ["RunResult", "code_version", "run_session", "turn_table"]
