"""Output against a recorded non-speculative reference (invariant 4, lossless).

The reference is a plain decoding run (drafter none) of the same conversation: same
backend, model, prompts, seed and sampling. Greedy speculative output must equal it token
for token; a sampled run can only be compared in distribution, which one log cannot do.
"""

from typing import Any

from eventlog.postmortem.finding import Finding, Kind, Severity
from eventlog.turns import TurnRecord

# Settings that change how tokens are produced, not which: they may differ.
_FREE = frozenset({
    "drafter", "draft_max", "draft_min", "ngram_n", "ngram_min_hits", "acceptance", "strategy",
    "eog_policy", "replay_policy", "draft_model", "draft_checkpoints", "livelock_guard",
    "audit", "strict", "ctx_checkpoints", "ctx_checkpoint_every", "profile",
})


def reference_problem(config: dict[str, Any], reference: dict[str, Any]) -> str | None:
    """Why `reference` cannot serve as the plain reference of `config`; None if it can."""
    if reference.get("drafter") != "none":
        return f"its drafter is '{reference.get('drafter')}', not 'none'"
    differ = sorted(k for k in config.keys() | reference.keys()
                    if k not in _FREE and config.get(k) != reference.get(k))
    if differ:
        shown = ", ".join(f"{k}={reference.get(k)!r} vs {config.get(k)!r}" for k in differ[:4])
        return f"it differs in {shown}"
    return None


def compare_outputs(turns: dict[tuple[int, int], TurnRecord],
                    reference: dict[tuple[int, int], TurnRecord], reference_id: int,
                    config: dict[str, Any]) -> Finding | None:
    """A finding when the visible answers differ from the reference's."""
    common = sorted(turns.keys() & reference.keys())
    differing = []
    for key in common:
        got, want = turns[key].answer, reference[key].answer
        if got != want:
            at = next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
                      min(len(got), len(want)))
            differing.append((key, at, got, want))
    if not differing:
        return None
    (slot, turn), at, got, want = differing[0]
    rec = turns[(slot, turn)]
    seq = rec.seq_of(at)
    sampled = float(config.get("temperature", 0.0) or 0.0) > 0
    numbers = {
        "reference": reference_id, "turns_compared": len(common), "turns_differing":
        len(differing), "first": {"slot": slot, "turn": turn, "token_index": at,
                                  "expected": want[at] if at < len(want) else None,
                                  "actual": got[at] if at < len(got) else None,
                                  "expected_len": len(want), "actual_len": len(got)},
        "sampled": sampled,
    }
    text = (f"{len(differing)} of {len(common)} turn(s) answer differently from the "
            f"non-speculative reference session {reference_id}; first in turn {turn} (slot "
            f"{slot}) at answer token {at}: expected {numbers['first']['expected']}, got "
            f"{numbers['first']['actual']}.")
    if sampled:
        text += (" The run samples (temperature > 0), so token-level differences are "
                 "expected; only the distribution must match.")
        return Finding(Kind.OUTPUT_MISMATCH, Severity.INFO, seq, seq, text,
                       "Compare greedy runs (--temperature 0) for a token-level check.",
                       numbers, slot, turn)
    return Finding(
        Kind.OUTPUT_MISMATCH, Severity.ERROR, seq, rec.last_seq, text,
        "Greedy speculative decoding must reproduce plain decoding: look for the cause at "
        "that round (state contamination, a stray token, batch-shape-dependent numerics) "
        f"and compare the logs with `specledger diff {reference_id} <session>`.",
        numbers, slot, turn)
