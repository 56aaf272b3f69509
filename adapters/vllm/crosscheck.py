"""vLLM's own numbers of one request against each other: its Prometheus counters (the
difference of the scrapes around the request), its per-request metrics, its usage and
the ids it streamed all count the same request, so they must agree. Every disagreement
becomes an invariant violation (bookkeeping) naming the counter's `source`, which the
postmortem reports as `engine_counter_mismatch`; nothing is corrected.

The checks, with k the configured draft size:
- Prometheus alone: accepted per position sums to the accepted total; a step that
  accepted the draft at position i+1 accepted the one at i (per position never rises);
  accepted <= drafted <= steps x k; no position accepted more often than there were steps.
- the answer's metrics alone: the histogram counts the steps and sums to the accepted;
  the per-step counts (at `detailed`) are one per step, sum to the totals, and each
  accepted <= drafted <= k.
- Prometheus against the answer: steps, drafted, accepted, per position (from the
  histogram), generated and prompt tokens (from usage and from the ids).
"""

from dataclasses import dataclass
from itertools import pairwise

from adapters.vllm.answers import Answer, SpecReport
from adapters.vllm.metrics import Counters
from fsm.invariants import Invariant, Violation

PROMETHEUS = "prometheus"


@dataclass(frozen=True)
class Check:
    """One comparison: what is checked, the two sources and their values; `relation`
    says what must hold between them (`==` or `<=`)."""

    check: str
    source: str
    engine: object
    other_source: str
    other: object
    relation: str = "=="

    def holds(self) -> bool:
        """Whether the relation holds."""
        if self.relation == "<=":
            return self.engine <= self.other  # type: ignore[operator]
        return self.engine == self.other

    def violation(self) -> Violation:
        """The violation recording a failed check."""
        said = "is" if self.relation == "==" else "exceeds"
        return Violation(Invariant.BOOKKEEPING,
                         f"vLLM's {self.check} ({self.source}) {said} {self.engine}, "
                         f"its {self.other_source} gives {self.other}",
                         {"check": self.check, "source": self.source, "engine": self.engine,
                          "ledger": self.other, "against": self.other_source})


def per_pos_of(histogram: tuple[int, ...]) -> tuple[int, ...]:
    """Steps that accepted the draft at each position, from a histogram of accepted drafts
    per step (index j: steps that accepted exactly j)."""
    return tuple(sum(histogram[j + 1:]) for j in range(len(histogram) - 1))


def _prometheus_checks(c: Counters, k: int) -> list[Check]:
    if c.drafts is None or c.draft_tokens is None or c.accepted is None or c.per_pos is None:
        return []
    out = [Check("accepted tokens per position, summed", PROMETHEUS, sum(c.per_pos),
                 "accepted tokens total", c.accepted),
           Check("accepted tokens", PROMETHEUS, c.accepted, "drafted tokens", c.draft_tokens,
                 "<="),
           Check("drafted tokens", PROMETHEUS, c.draft_tokens, f"drafts x k ({k})",
                 c.drafts * k, "<=")]
    out += [Check(f"accepted at position {i + 1}", PROMETHEUS, later,
                  f"accepted at position {i}", earlier, "<=")
            for i, (earlier, later) in enumerate(pairwise(c.per_pos))]
    if c.per_pos:
        out.append(Check("accepted at position 0", PROMETHEUS, c.per_pos[0], "drafts",
                         c.drafts, "<="))
    return out


def _report_checks(s: SpecReport, source: str) -> list[Check]:
    out = [Check("verify steps in the histogram", source, sum(s.histogram), "num_spec_steps",
                 s.steps),
           Check("accepted drafts in the histogram", source,
                 sum(j * n for j, n in enumerate(s.histogram)), "num_accepted_draft_tokens",
                 s.accepted)]
    if s.per_step_drafted is not None and s.per_step_accepted is not None:
        out += [Check("per-step counts", source, len(s.per_step_drafted), "num_spec_steps",
                      s.steps),
                Check("drafted tokens, summed per step", source, sum(s.per_step_drafted),
                      "num_draft_tokens", s.drafted),
                Check("accepted drafts, summed per step", source, sum(s.per_step_accepted),
                      "num_accepted_draft_tokens", s.accepted)]
        out += [Check(f"step {i}'s accepted drafts", source, a, "its drafted", d, "<=")
                for i, (d, a) in enumerate(zip(s.per_step_drafted, s.per_step_accepted,
                                               strict=False)) if a > d]
        out += [Check(f"step {i}'s drafted tokens", source, d, "k", s.k, "<=")
                for i, d in enumerate(s.per_step_drafted) if d > s.k]
    return out


def _against_checks(a: Answer, c: Counters, source: str) -> list[Check]:
    out: list[Check] = []
    s = a.spec
    if s is not None and c.drafts is not None:
        out += [Check("verify steps", PROMETHEUS, c.drafts, f"{source} num_spec_steps",
                      s.steps),
                Check("drafted tokens", PROMETHEUS, c.draft_tokens,
                      f"{source} num_draft_tokens", s.drafted),
                Check("accepted tokens", PROMETHEUS, c.accepted,
                      f"{source} num_accepted_draft_tokens", s.accepted)]
        if c.per_pos is not None:
            out.append(Check("accepted tokens per position", PROMETHEUS, list(c.per_pos),
                             f"{source} acceptance histogram", list(per_pos_of(s.histogram))))
    if a.completion_tokens is not None:
        out.append(Check("generated tokens", PROMETHEUS, c.generation_tokens,
                         f"{source} usage", a.completion_tokens))
    if a.prompt_tokens is not None:
        out.append(Check("prompt tokens", PROMETHEUS, c.prompt_tokens, f"{source} usage",
                         a.prompt_tokens))
    return out


def answer_checks(a: Answer, k: int) -> list[Check]:
    """Every check of one answer (`k`: the server's draft size)."""
    source = f"response {a.index}"
    out: list[Check] = []
    if a.completion_tokens is not None:
        out.append(Check("completion tokens", f"{source} usage", a.completion_tokens,
                         "streamed ids", len(a.tokens)))
    if a.prompt_tokens is not None and a.prompt_ids is not None:
        out.append(Check("prompt tokens", f"{source} usage", a.prompt_tokens, "prompt ids",
                         len(a.prompt_ids)))
    if a.spec is not None:
        out += _report_checks(a.spec, source)
    if a.counters is not None:
        out += _prometheus_checks(a.counters, k) + _against_checks(a, a.counters, source)
    return out


def answer_violations(a: Answer, k: int) -> list[Violation]:
    """The checks of one answer that fail, as violations."""
    return [c.violation() for c in answer_checks(a, k) if not c.holds()]
