"""A postmortem finding: what went wrong, where in the log, the numbers, and the fix."""

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple


class Severity(StrEnum):
    """`error`: an invariant failed or the engine could not make progress (gates CI);
    `warning`: the output is right but work was wasted; `info`: worth knowing."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


SEVERITY_ORDER = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}


class Kind(StrEnum):
    """The kinds of finding, one per failure pattern the log can show."""

    EOG_STRAY_TOKENS = "eog_stray_tokens"                  # llama.cpp #28049
    STOP_STRAY_TOKENS = "stop_stray_tokens"                # llama.cpp 0.3.21's length stop
    HISTORY_REPREFILL = "history_reprefill"
    REPLAY_LIVELOCK = "replay_livelock"                    # llama.cpp #28060
    RESTORE_STORM = "restore_storm"
    STATE_CONTAMINATION = "state_contamination"            # DotLLM, seed 004
    OUTPUT_MISMATCH = "output_mismatch"                    # invariant 4
    SPECULATIVE_NOT_LOSSLESS = "speculative_not_lossless"  # vLLM #39273
    DRAFT_CHECKPOINT_DISCARD = "draft_checkpoint_discard"  # llama.cpp PR 22521
    ACCEPTANCE_COLLAPSE = "acceptance_collapse"            # cf. llama.cpp PR 22168
    INVARIANT_VIOLATION = "invariant_violation"
    ENGINE_COUNTER_MISMATCH = "engine_counter_mismatch"    # an imported engine's own counts
    ACCEPTANCE_INFLATION = "acceptance_inflation"          # llama.cpp PR 26320
    SAMPLER_MISMATCH = "sampler_mismatch"                  # the sampler asked vs the one used
    RUN_FAILED = "run_failed"
    INCOMPLETE_LOG = "incomplete_log"
    CHECK_SKIPPED = "check_skipped"                        # an imported log lacks the input
    SERVER_CRASH = "server_crash"                          # a server run that died
    KV_CACHE_EXHAUSTED = "kv_cache_exhausted"              # no KV cells left for a batch
    HTTP_ERRORS = "http_errors"                            # answers other than success
    CHECKPOINTS_ERASED = "checkpoints_erased"              # llama.cpp #25023
    ACCEPTANCE_IMPLAUSIBLE = "acceptance_implausible"      # am17an/llama.cpp PR 6
    DRAFTER_STATS = "drafter_stats"                        # each drafter's own statistics
    PARTIAL_REQUEST = "partial_request"                    # a log's piece cuts a request
    SPECULATION_SLOWER = "speculation_slower"              # vLLM #39680
    REQUESTS_WAITING = "requests_waiting"                  # an interval log's waiting queue
    PREFIX_CACHE_ZERO = "prefix_cache_zero"                # hybrid + speculation, no hits
    DRAFT_POSITIONS_WASTED = "draft_positions_wasted"      # club-3090 #105
    ACCEPTANCE_SATURATED = "acceptance_saturated"          # SGLang #28179


@dataclass(frozen=True)
class Finding:
    """One finding. `first_seq..last_seq` is the stretch of the log that shows it;
    `slot`, `turn` and `round` place its first occurrence; `numbers` are the measurements
    the explanation quotes."""

    kind: Kind
    severity: Severity
    first_seq: int
    last_seq: int
    explanation: str
    fix: str
    numbers: dict[str, Any] = field(default_factory=dict)
    slot: int | None = None
    turn: int | None = None
    round: int | None = None

    def place(self) -> str:
        """Where the finding is, as `postmortem` and the report say it: its stretch of the
        session's events, the log line it starts at (an imported log's server-level
        findings), its slot, turn and round."""
        parts = [f"seq {self.first_seq}..{self.last_seq}"] if self.first_seq else []
        if isinstance(self.numbers.get("first_line"), int):
            parts.append(f"log line {self.numbers['first_line']}")
        if self.turn is not None:
            parts.append(f"slot {self.slot} turn {self.turn}"
                         + (f" round {self.round}" if self.round else ""))
        return ", ".join(parts) or "the whole session"

    def to_dict(self) -> dict[str, Any]:
        """JSON form (the `postmortem --json` contract)."""
        return {"kind": self.kind.value, "severity": self.severity.value,
                "seq": [self.first_seq, self.last_seq], "slot": self.slot, "turn": self.turn,
                "round": self.round, "numbers": self.numbers, "explanation": self.explanation,
                "fix": self.fix}


class Noted(NamedTuple):
    """An event a detector keeps for its finding: its place (the first four fields of its
    `Row`) and what the finding quotes of it (its payload, or figures taken from it)."""

    seq: int
    slot: int
    turn: int
    round: int
    detail: Any


def sort_findings(findings: list[Finding]) -> list[Finding]:
    """Errors first, then warnings, then notes; each in log order."""
    return sorted(findings, key=lambda f: (SEVERITY_ORDER[f.severity], f.first_seq, f.kind))
