"""What a fitted llama-server log measured, and where a prediction needs more.

A fit (adapters/llama/calibration/fit.py) holds the costs its log paid: forwards of the batch sizes
it ran, the drafters it called, the checkpoints it saved and restored, plain and
speculative rounds, one target graph (its nodes: the per-position states `n_rs_seq` it
kept), one build. A prediction of a server that needs anything else stands on a rule
instead of a measurement: a forward beyond the sizes measured is the curve extended
(adapters/llama/calibration/curve.py), a drafter never run is charged 0 or its share of the
model's shape, another graph is charged per node. Such a prediction is an extrapolation,
and `outside` says why, in words, for `calibrate`, `whatif` and the cross-validation
suite (specbench/calibration/llama/logs.py) to print beside the number.
"""

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from adapters.llama.calibration.clock import LogClock, Segment
from adapters.llama.calibration.fit import MTP


class Beyond(StrEnum):
    """What a prediction needs that its fit log never measured."""

    BUILD = "build"
    SIZES = "batch sizes"
    CONTEXT = "context"
    DRAFTER = "drafter"
    CHECKPOINTS = "checkpoints"
    ROUNDS = "rounds"
    GRAPH = "graph"


@dataclass(frozen=True)
class Why:
    """One reason a prediction is an extrapolation: its kind and the clause that says it."""

    beyond: Beyond
    clause: str


@dataclass(frozen=True)
class Reach:
    """What a fit log measured: its forwards' batch sizes (decode and prompt, the smallest
    and the largest), the drafters its server ran (llama.cpp's names), whether it saved
    and restored speculative checkpoints, ran plain and speculative rounds, its target's
    graph nodes and per-position states (None: not printed), its build and whether it
    printed the model's shape (an MTP head's costs are derived from it)."""

    smallest: int
    largest: int
    drafters: tuple[str, ...]
    saves: bool
    restores: bool
    plain: bool
    speculative: bool
    graph_nodes: int | None
    n_rs_seq: int | None
    build: str | None
    shape: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON form (calibrate's output and the profile it writes)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Reach":
        """The reach a `to_dict` wrote."""
        return cls(**{**data, "drafters": tuple(data["drafters"])})

    def describe(self) -> str:
        """What the fit log measured, in one line."""
        rounds = " and ".join(k for k, on in (("plain", self.plain),
                                              ("speculative", self.speculative)) if on)
        ckpt = ("speculative checkpoints saved" + (" and restored" if self.restores else "")
                if self.saves else "no speculative checkpoint")
        graph = ("graph not printed" if self.graph_nodes is None
                 else f"a {self.graph_nodes}-node graph (n_rs_seq {self.n_rs_seq})")
        drafters = ", ".join(self.drafters) or "no drafter"
        return (f"forwards of {self.smallest}-{self.largest} tokens, {rounds} rounds, "
                f"{drafters}, {ckpt}, {graph}, {self.build or 'build not logged'}")


REACH_FORWARDS = 3
"""A batch size is measured where the log timed at least this many forwards of it (the
tail of an answer drafts less than the rest: one verify of 2 tokens is no measurement)."""


def reach_of(clock: LogClock) -> Reach:
    """What the log of `clock` measured: its forwards (decode and prompt) of the sizes it
    ran `REACH_FORWARDS` times or more, and between them."""
    segs = clock.segments
    counts = Counter([b for s in segs for b, _ in s.forwards] + [c.tokens for c in clock.chunks])
    sizes = [b for b, n in counts.items() if n >= REACH_FORWARDS] or list(counts)
    return Reach(smallest=min(sizes), largest=max(sizes), drafters=clock.drafters,
                 saves=any(s.saves for s in segs), restores=any(s.restores for s in segs),
                 plain=any(not s.speculative for s in segs),
                 speculative=any(s.speculative for s in segs), graph_nodes=clock.graph_nodes,
                 n_rs_seq=clock.n_rs_seq, build=clock.build, shape=clock.shape is not None)


def sizes_outside(reach: Reach, sizes: Sequence[int]) -> str | None:
    """The clause for forwards of `sizes` (one per forward) the fit log never measured
    the like of (None: all inside its sizes)."""
    out = sorted(b for b in sizes if not reach.smallest <= b <= reach.largest)
    if not out:
        return None
    span = f"{out[0]}" if out[0] == out[-1] else f"{out[0]}-{out[-1]}"
    return (f"{len(out)} of its {len(sizes)} forwards carry {span} token(s), outside the "
            f"{reach.smallest}-{reach.largest} the fit log measured (the curve extended)")


def drafter_outside(reach: Reach, drafter: str) -> str | None:
    """The clause for a drafter the fit log never ran (None: it ran it)."""
    if drafter in reach.drafters:
        return None
    how = ("derived from the model's shape" if drafter == MTP and reach.shape
           else "charged 0")
    return f"{drafter} never ran in the fit log (its costs {how})"


def graph_outside(reach: Reach, graph_nodes: int | None, n_rs_seq: int | None) -> str | None:
    """The clause for a target graph other than the fit log's (None: the same, or either
    not printed)."""
    if graph_nodes is None or reach.graph_nodes is None or graph_nodes == reach.graph_nodes:
        return None
    return (f"its target graph has {graph_nodes} nodes (n_rs_seq {n_rs_seq}), the fit "
            f"log's {reach.graph_nodes} (n_rs_seq {reach.n_rs_seq}): the difference charged "
            "per node, not measured")


def states_outside(reach: Reach, n_rs_seq: int) -> str | None:
    """The clause for a server keeping `n_rs_seq` per-position states where the fit log's
    kept another number (None: the same, or the fit log's not printed)."""
    if reach.n_rs_seq is None or n_rs_seq == reach.n_rs_seq:
        return None
    return (f"it keeps {n_rs_seq} per-position state(s) (n_rs_seq), the fit log's server "
            f"{reach.n_rs_seq}: the difference charged per graph node, not measured")


def _drafters(segs: Sequence[Segment]) -> list[str]:
    names = {d for s in segs for d in s.called} | {s.drafter for s in segs if s.drafter}
    names |= {s.pass_drafter for s in segs if s.pass_drafter and s.pass_s}
    return sorted(names)


def outside(reach: Reach, clock: LogClock) -> tuple[Why, ...]:
    """Why a prediction of the log of `clock` from a fit of reach `reach` is an
    extrapolation: one reason per thing it needs that the fit log never measured (empty:
    inside the fit's reach)."""
    segs = clock.segments
    out: list[tuple[Beyond, str | None]] = [
        (Beyond.BUILD, None if clock.build == reach.build else
         f"its build ({clock.build}) is not the fit log's ({reach.build})"),
        (Beyond.SIZES, sizes_outside(reach, [b for s in segs for b, _ in s.forwards])),
        *((Beyond.DRAFTER, drafter_outside(reach, d)) for d in _drafters(segs)),
        (Beyond.CHECKPOINTS, "it saves speculative checkpoints, which the fit log never did"
         if any(s.saves for s in segs) and not reach.saves else None),
        (Beyond.CHECKPOINTS, "it restores speculative checkpoints, which the fit log never did"
         if any(s.restores for s in segs) and not reach.restores else None),
        (Beyond.ROUNDS, "it runs plain rounds, the fit log none (every round of it speculative)"
         if any(not s.speculative for s in segs) and not reach.plain else None),
        (Beyond.ROUNDS, "it runs speculative rounds, the fit log none"
         if any(s.speculative for s in segs) and not reach.speculative else None),
        (Beyond.GRAPH, graph_outside(reach, clock.graph_nodes, clock.n_rs_seq)),
    ]
    return tuple(Why(kind, clause) for kind, clause in out if clause is not None)
