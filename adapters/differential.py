"""Differential test of engines on the same weights: the greedy answers of our engine,
llama.cpp's llama-server and vLLM, each plain and with its speculative methods, compared
token by token, with each engine's top-1 minus top-2 gap at every answer position.

Greedy decoding takes the argmax, so two correct computations of one model can part only
where rounding reorders the two likeliest tokens: a near-tie. At the first position where
two answers differ, both engines have read the same tokens, so both must see the two
candidates almost level there: a divergence is explained (a near-tie) when every gap an
engine reports at that position is within the near-tie bound of the coarser dtype of the
two (`near_tie_bound`). Gaps are logit gaps for ours and log-probability gaps for
llama-server (`n_probs`) and vLLM (`top_logprobs`): the same number, since log-softmax
shifts every logit by one constant. An answer that ends where the other goes on is never a
near-tie.

Which answers are compared (`compare_runs`):
- each engine's plain answers against our plain answers in the same dtype (cross-engine);
- each speculative run against the same engine's plain run (speculative). Greedy
  speculative decoding is lossless, so a difference at a non-tie is a bug of the vLLM
  #39273 class: speculation changed the output while acceptance looked healthy. The
  postmortem names it `speculative_not_lossless` (`not_lossless_findings`);
- our bfloat16 answers against our float32 ones (precision): what bf16 rounding alone
  moves, judged by the bf16 bound like the rest.

Nothing here imports torch; each engine's answers are built by `adapters.answers`.
"""

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from engine.config import DType
from engine.errors import ConfigError
from eventlog.postmortem.finding import Finding
from eventlog.postmortem.lossless import NotLossless, not_lossless_finding

PLAIN = "none"
GAP_BOUNDS = {DType.FLOAT32: 1e-3, DType.BFLOAT16: 0.25}


def near_tie_bound(dtype: DType) -> float:
    """The largest top-2 gap rounding in `dtype` is taken to flip (`GAP_BOUNDS`), set well
    above the most the gap moved between two engines computing in it while their answers
    still agreed (`Comparison.drift`, shipped:wide, 50 held-out prompts):
    - float32: 1e-3; ours against llama-server (f32 GGUF and KV cache, no flash
      attention): at most 1.4e-5 (median 5.9e-7) over 6,400 positions;
    - bfloat16: 0.25; ours against vLLM: at most 0.094 (median 1.2e-7) over 4,354
      positions. A bf16 logit of this model's size is a multiple of 1/32 or 1/16, so a gap
      is 0, 0.03, 0.06, ...: the bound is 8 such steps, and many greedy choices are exact
      ties (gap 0), which the two engines break differently."""
    return GAP_BOUNDS[dtype]


class Relation(StrEnum):
    """How the two runs of a comparison relate."""

    CROSS_ENGINE = "cross_engine"  # two engines, plain, one dtype
    SPECULATIVE = "speculative"    # one engine, plain vs a speculative method
    PRECISION = "precision"        # one engine, float32 vs bfloat16


@dataclass(frozen=True)
class Answer:
    """One engine's greedy answer to one prompt: its tokens, the top-1 minus top-2 gap the
    engine reported at each of them (None where it reported none), and the drafted and
    accepted tokens behind it (0 for plain decoding, or where the engine does not say).
    `error` says why there is no answer (the engine died on the prompt, or was not asked
    it after dying too often); its tokens are then empty."""

    tokens: tuple[int, ...]
    gaps: tuple[float | None, ...]
    drafted: int = 0
    accepted: int = 0
    error: str | None = None

    def __post_init__(self) -> None:
        if len(self.gaps) != len(self.tokens):
            raise ConfigError(f"answer: {len(self.gaps)} gaps for {len(self.tokens)} tokens")


@dataclass(frozen=True)
class Run:
    """One engine configuration's answers to the prompts, in prompt order: the engine, its
    speculative method by the engine's own name (`none`: plain decoding) and its dtype."""

    engine: str
    method: str
    dtype: DType
    answers: tuple[Answer, ...]

    @property
    def plain(self) -> bool:
        """Whether this is plain decoding."""
        return self.method == PLAIN

    @property
    def label(self) -> str:
        """`engine method dtype`, e.g. `vllm ngram bfloat16`."""
        return f"{self.engine} {self.method} {self.dtype.value}"


@dataclass(frozen=True)
class Divergence:
    """Where a run's answer to prompt `prompt` first leaves the reference's: the token each
    chose at `position` (None where that answer had already ended), each engine's gap
    there (None: not reported, or the answer had ended) and the bound it is judged by."""

    prompt: int
    position: int
    expected: int | None
    actual: int | None
    expected_gap: float | None
    actual_gap: float | None
    bound: float

    @property
    def near_tie(self) -> bool:
        """Whether rounding can explain it: both answers go on, at least one engine gave
        its gap, and every gap given is within the bound."""
        if self.expected is None or self.actual is None:
            return False
        gaps = [g for g in (self.expected_gap, self.actual_gap) if g is not None]
        return bool(gaps) and all(g <= self.bound for g in gaps)


def first_divergence(prompt: int, ref: Answer, other: Answer, bound: float
                     ) -> Divergence | None:
    """Where `other` first differs from `ref` (answers to prompt `prompt`), or None."""
    if other.tokens == ref.tokens:
        return None
    pos = next((i for i, (a, b) in enumerate(zip(ref.tokens, other.tokens, strict=False))
                if a != b), min(len(ref.tokens), len(other.tokens)))

    def at(answer: Answer) -> tuple[int | None, float | None]:
        inside = pos < len(answer.tokens)
        return (answer.tokens[pos], answer.gaps[pos]) if inside else (None, None)

    (expected, expected_gap), (actual, actual_gap) = at(ref), at(other)
    return Divergence(prompt, pos, expected, actual, expected_gap, actual_gap, bound)


@dataclass
class Comparison:
    """One run against a reference run, prompt by prompt."""

    relation: Relation
    reference: Run
    run: Run
    bound: float
    identical: int = 0
    divergences: list[Divergence] = field(default_factory=list)
    failed: list[tuple[int, str]] = field(default_factory=list)
    """(prompt, error) of each prompt either run has no answer to: not compared."""
    drift: list[float] = field(default_factory=list)
    """|gap difference| between the two engines at every position where both answers
    still agree and both gave a gap: how far rounding moves a gap (what the bound must
    cover)."""

    @property
    def answers(self) -> int:
        """How many answers were compared."""
        return len(self.run.answers)

    @property
    def explained(self) -> bool:
        """Every divergence is a near-tie (failed prompts aside: see `failed`)."""
        return all(d.near_tie for d in self.divergences)

    @property
    def not_lossless(self) -> list[Divergence]:
        """A speculative run's divergences from its own engine's plain run that no
        rounding explains (empty for the other relations)."""
        if self.relation is not Relation.SPECULATIVE:
            return []
        return [d for d in self.divergences if not d.near_tie]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able mapping: the two runs by label, the counts, every divergence."""
        return {"relation": self.relation.value, "reference": self.reference.label,
                "run": self.run.label, "bound": self.bound, "answers": self.answers,
                "identical": self.identical, "explained": self.explained,
                "failed": [{"prompt": i, "error": e} for i, e in self.failed],
                "drift": drift_summary(self.drift),
                "drafted": sum(a.drafted for a in self.run.answers),
                "accepted": sum(a.accepted for a in self.run.answers),
                "divergences": [asdict(d) | {"near_tie": d.near_tie}
                                for d in self.divergences]}


def drift_summary(drift: Sequence[float]) -> dict[str, float | int | None]:
    """How many gaps were compared, the largest and the median difference (None: none)."""
    ordered = sorted(drift)
    return {"positions": len(ordered), "max": ordered[-1] if ordered else None,
            "median": ordered[len(ordered) // 2] if ordered else None}


def compare(relation: Relation, reference: Run, run: Run) -> Comparison:
    """`run`'s answers against `reference`'s, judged by the near-tie bound of the coarser
    of their two dtypes."""
    if len(run.answers) != len(reference.answers):
        raise ConfigError(f"differential: {run.label} has {len(run.answers)} answers, "
                          f"{reference.label} {len(reference.answers)}")
    bound = max(near_tie_bound(reference.dtype), near_tie_bound(run.dtype))
    result = Comparison(relation, reference, run, bound)
    for i, (ref, answer) in enumerate(zip(reference.answers, run.answers, strict=True)):
        error = ref.error or answer.error
        if error is not None:
            result.failed.append((i, error))
            continue
        d = first_divergence(i, ref, answer, bound)
        shared = len(ref.tokens) if d is None else d.position
        result.drift += [abs(a - b) for a, b in zip(ref.gaps[:shared], answer.gaps[:shared],
                                                    strict=True)
                         if a is not None and b is not None]
        if d is None:
            result.identical += 1
        else:
            result.divergences.append(d)
    return result


def compare_runs(ours: str, runs: Sequence[Run]) -> list[Comparison]:
    """Every comparison the module's docstring lists, among `runs` (engine `ours` is our
    engine, whose plain runs are the references): cross-engine, speculative, precision."""
    plain = {(r.engine, r.dtype): r for r in runs if r.plain}
    out: list[Comparison] = []
    for run in runs:
        if run.plain and run.engine != ours and (ours, run.dtype) in plain:
            out.append(compare(Relation.CROSS_ENGINE, plain[ours, run.dtype], run))
        if not run.plain:
            base = plain.get((run.engine, run.dtype))
            if base is None:
                raise ConfigError(f"differential: {run.label} has no plain run of "
                                  f"{run.engine} in {run.dtype.value} to be judged against")
            out.append(compare(Relation.SPECULATIVE, base, run))
    f32, bf16 = plain.get((ours, DType.FLOAT32)), plain.get((ours, DType.BFLOAT16))
    if f32 is not None and bf16 is not None:
        out.append(compare(Relation.PRECISION, f32, bf16))
    return out


def not_lossless_findings(comparisons: Sequence[Comparison]) -> list[Finding]:
    """The postmortem's `speculative_not_lossless` finding for each speculative run whose
    answers left its engine's plain answers at a non-tie."""
    return [not_lossless_finding(NotLossless(
        engine=c.run.engine, method=c.run.method, dtype=c.run.dtype.value,
        answers=c.answers - len(c.failed), differing=len(c.divergences),
        not_ties=len(bad), failed=len(c.failed),
        drafted=sum(a.drafted for a in c.run.answers),
        accepted=sum(a.accepted for a in c.run.answers),
        **asdict(bad[0])))  # the first: its place, tokens, gaps and bound
        for c in comparisons if (bad := c.not_lossless)]


def _gap(g: float | None) -> str:
    return "-" if g is None else f"{g:.3g}"


def report(comparisons: Sequence[Comparison]) -> str:
    """A line per comparison, then one per divergence with both gaps and the verdict."""
    lines = []
    for c in comparisons:
        drafted = sum(a.drafted for a in c.run.answers)
        accepted = sum(a.accepted for a in c.run.answers)
        acc = f", acceptance {accepted / drafted:.2f}" if drafted else ""
        drift = drift_summary(c.drift)
        moved = (f", gaps moved by at most {drift['max']:.3g} (median {drift['median']:.3g}) "
                 f"over {drift['positions']} shared positions" if drift["positions"] else "")
        died = (f", {len(c.failed)} without an answer (first: prompt {c.failed[0][0]}: "
                f"{c.failed[0][1]})" if c.failed else "")
        lines.append(f"{c.run.label} vs {c.reference.label} ({c.relation.value}): "
                     f"{c.identical}/{c.answers} token-identical, {len(c.divergences)} "
                     f"divergent{died}{acc}, near-tie bound {c.bound:g}{moved}")
        lines += [f"  prompt {d.prompt} position {d.position}: {d.expected} vs {d.actual}, "
                  f"gaps {_gap(d.expected_gap)} / {_gap(d.actual_gap)} "
                  f"({'near-tie' if d.near_tie else 'NOT a near-tie'})"
                  for d in c.divergences]
    return "\n".join(lines)
