"""Fitting cost terms to a log's timed pieces: synthetic logs of known terms give them
back (the forward's cost at each batch size the log measured, from decode forwards and
prompt forwards alike, the round's, each drafter's call and pass); a term the log never
exercises is absent, one it cannot tell apart from others is fixed and names them; a
scheduler stall is dropped from the fit and charged back as the machine's level; a
forward's fixed cost is charged per node of the graph it runs; the profile the fit gives
the sim charges what the fit charges; an MTP head the log never ran is charged its share
of the forward by the model's shape."""

import itertools
import statistics
from dataclasses import replace

import numpy as np
import pytest

from adapters.llama.calibration.clock import Chunk, LogClock, Segment, TaskClock
from adapters.llama.calibration.curve import Curve, slope_term
from adapters.llama.calibration.fit import (
    MTP,
    call_term,
    draft_term,
    features,
    fit_log,
    forward_s,
    pass_term,
    pass_token_term,
    predict_segment,
    predict_tok_s,
    segment_rows,
    to_profile,
)
from adapters.llama.gguf.shape import ModelShape

# a forward: 0.4 ms at one token, +0.8 ms for the second (the chunked recurrence), then
# 0.15 ms a token up to 9, 0.1 ms a token beyond: what the shipped model's CPU forwards
# look like, in round numbers
KNOTS = (1, 2, 9, 400)
COSTS = (0.4e-3, 1.2e-3, 2.25e-3, 41.35e-3)
ROUND = {"loop_s": 0.03e-3, "round_s": 0.05e-3, "save_s": 0.1e-3, "restore_s": 0.12e-3,
         "line_s": 2e-6}
CALL = {call_term(MTP): 0.2e-3, draft_term(MTP): 0.1e-3, call_term("ngram-mod"): 0.02e-3,
        pass_term(MTP): 0.1e-3, pass_token_term(MTP): 0.05e-3,
        pass_term("ngram-mod"): 0.03e-3, pass_token_term("ngram-mod"): 0.0}
REBUILD = 0.2e-3


def _forward(b: int, rebuilt: bool) -> float:
    return float(np.interp(b, KNOTS, COSTS)) + (REBUILD if rebuilt else 0.0)


def _timed(forwards: tuple[tuple[int, int], ...], rebuilt: tuple[bool, ...], drafter: str | None,
           drafted: int, called: tuple[str, ...], saves: int, restores: int, lines: int,
           passer: str | None, rng: np.random.Generator, noise: float) -> Segment:
    """A round of known pieces, each timed as 0.3.36 times it (its brackets)."""
    def jitter(x: float) -> float:
        return x * (1 + noise * rng.standard_normal())
    fw = tuple(jitter(_forward(b, r)) for (b, _), r in zip(forwards, rebuilt, strict=True))
    passes = (tuple(jitter(CALL[pass_term(passer)] + CALL[pass_token_term(passer)] * b)
                    for b, _ in forwards) if passer else None)
    call = (sum(CALL[call_term(d)] for d in called)
            + (CALL[draft_term(drafter)] * drafted if drafter else 0.0))
    draft_s = jitter(call) if called else None
    speculative = drafted > 0 or bool(saves)
    rest = jitter(ROUND["loop_s"] + ROUND["round_s"] * speculative + ROUND["save_s"] * saves
                  + ROUND["restore_s"] * restores + ROUND["line_s"] * lines)
    total = sum(fw) + sum(passes or ()) + (draft_s or 0.0) + rest
    return Segment(0, total, forwards, drafter, drafted, saves, restores, speculative,
                   draft_s=draft_s, pass_s=passes, pass_drafter=passer, forward_s=fw,
                   rebuilt=rebuilt, lines=lines, called=called)


def _mtp_log(n: int = 200, noise: float = 0.0, seed: int = 0, top: int = 8) -> LogClock:
    """A draft-mtp server under p-min: drafts of 1 to `top` tokens and plain rounds whose
    call drafted nothing, prompt forwards of several sizes."""
    rng = np.random.default_rng(seed)
    segs, before = [], 1
    for i in range(n):
        k = int(rng.integers(0, top + 1))
        b = k + 1
        segs.append(_timed(((b, 100 + i),), (b != before,), MTP if k else None, k, (MTP,),
                           0, 0, 15 + 6 * k, MTP, rng, noise))
        before = b
    return _clock(segs, (MTP,), rng, noise)


def _ngram_log(n: int = 600, noise: float = 0.0, seed: int = 0) -> LogClock:
    """An ngram-mod server: plain rounds, and verifies of 9 with a checkpoint saved, half of
    them restored and a replay of what they kept."""
    rng = np.random.default_rng(seed)
    segs, before = [], 1
    for i in range(n):
        if i % 3:
            fw: tuple[tuple[int, int], ...] = ((1, 100 + i),)
            saves = restores = kept = 0
        else:
            restores = int(rng.integers(0, 2))
            kept = int(rng.integers(1, 9))
            fw = ((9, 100 + i), *(((kept, 100 + i),) if restores else ()))
            saves = 1
        batches = [before, *(b for b, _ in fw)]
        rebuilt = tuple(a != b for a, b in itertools.pairwise(batches))
        lines = 10 + int(rng.integers(0, 20)) + 6 * kept  # a line per token, and the lookups
        segs.append(_timed(fw, rebuilt, None, 0, ("ngram-mod",), saves, restores, lines,
                           "ngram-mod", rng, noise))
        before = fw[-1][0]
    return _clock(segs, ("ngram-mod",), rng, noise)


def _clock(segs: list[Segment], drafters: tuple[str, ...], rng: np.random.Generator,
           noise: float) -> LogClock:
    total = sum(s.seconds for s in segs)
    chunks = [Chunk(0, t, 0, _forward(t, True) * (1 + noise * rng.standard_normal()))
              for t in (4, 9, 9, 9, 130, 130, 130, 400, 400, 400)]
    return LogClock(tasks=[TaskClock(0, tuple(segs), total, len(segs), total)], chunks=chunks,
                    drafters=drafters)


def test_exact_pieces_give_back_the_forward_curve_and_every_term() -> None:
    fit = fit_log(_mtp_log())
    assert fit.curve.knots[0] == 1 and fit.curve.knots[-1] == 400
    for b in (1, 2, 5, 9, 130, 400):
        assert forward_s(fit, b) == pytest.approx(_forward(b, False), rel=1e-6), b
    for name in ("loop_s", "round_s", "line_s"):
        assert fit.value(name) == pytest.approx(ROUND[name], rel=1e-6), name
    for name in (call_term(MTP), draft_term(MTP), pass_term(MTP), pass_token_term(MTP)):
        assert fit.terms[name].status == "fitted"
        assert fit.value(name) == pytest.approx(CALL[name], rel=1e-6), name
    assert fit.value("rebuild_s") == pytest.approx(REBUILD, rel=1e-6)
    assert fit.level == pytest.approx(1.0)
    assert fit.residuals is not None and fit.residuals.max_abs < 1e-6


def test_prompt_forwards_alone_give_the_curve_beyond_the_decode_sizes() -> None:
    # the decode rounds run only 1 and 9 tokens; the prompt's 130 and 400 come from its
    # forwards, interpolated between
    fit = fit_log(_ngram_log())
    assert 130 in fit.curve.knots
    assert forward_s(fit, 130) == pytest.approx(_forward(130, False), rel=1e-6)
    assert forward_s(fit, 265) == pytest.approx(_forward(265, False), rel=1e-6)


def test_noisy_pieces_recover_the_terms_within_their_spread() -> None:
    fit = fit_log(_mtp_log(n=600, noise=0.05, seed=3))
    for name, value in (("loop_s", ROUND["loop_s"]), (draft_term(MTP), CALL[draft_term(MTP)])):
        t = fit.terms[name]
        assert t.spread is not None and t.spread > 0
        assert abs(t.value - value) < 4 * t.spread, name
    assert fit.residuals is not None and 0.02 < fit.residuals.rms < 0.1


def test_a_server_without_a_drafter_is_predicted_from_the_forward_and_the_round() -> None:
    # the ngram-mod log's plain rounds also called its lookup and ran its pass, each timed
    # apart: a server without a drafter pays neither
    fit = fit_log(_ngram_log())
    plain = Segment(0, 0.0, ((1, 500),), None, 0, 0, 0, False, rebuilt=(False,), lines=15)
    assert predict_segment(fit, plain) == pytest.approx(
        _forward(1, False) + ROUND["loop_s"] + 15 * ROUND["line_s"], rel=1e-6)


def test_a_term_the_log_never_exercises_is_absent_and_one_it_cannot_tell_is_named() -> None:
    fit = fit_log(_mtp_log())
    assert fit.terms["save_s"].status == fit.terms["restore_s"].status == "absent"
    ngram = fit_log(_ngram_log())
    # a checkpoint every speculative round: the round's own cost goes with it
    assert ngram.terms["round_s"].status == "unseparated"
    assert "save_s" in ngram.terms["round_s"].carried_by
    assert ngram.value("save_s") == pytest.approx(ROUND["save_s"] + ROUND["round_s"], rel=1e-6)


def test_a_log_that_rarely_rebuilds_leaves_the_cost_in_the_forward() -> None:
    clock = _ngram_log()
    segs = [replace(s, rebuilt=(False,) * len(s.forwards)) for s in clock.segments]
    segs[0] = replace(segs[0], rebuilt=(True,) * len(segs[0].forwards))
    clock.tasks = [replace(clock.tasks[0], segments=tuple(segs))]
    term = fit_log(clock).terms["rebuild_s"]
    assert (term.status, term.value, term.carried_by) == ("unseparated", 0.0, ("launch_s",))


def test_a_stall_is_dropped_from_the_fit_and_charged_back_as_the_machines_level() -> None:
    clock = _mtp_log(n=300, noise=0.01, seed=1)
    segs = list(clock.segments)
    s = segs[10]
    assert s.forward_s is not None
    stall = 5e-3
    segs[10] = replace(s, seconds=s.seconds + stall, forward_s=(s.forward_s[0] + stall,))
    clock.tasks = [replace(clock.tasks[0], segments=tuple(segs))]
    fit = fit_log(clock)
    assert fit.residuals is not None and fit.residuals.dropped >= 1
    assert fit.residuals.stall_s == pytest.approx(stall, rel=0.1)
    assert forward_s(fit, 5) == pytest.approx(_forward(5, False), rel=0.02)
    # its own log predicted as measured: the stall's share charged to every round
    measured = sum(s.seconds for s in segs)
    assert sum(predict_segment(fit, s) for s in segs) == pytest.approx(measured, rel=1e-9)
    assert fit.level == pytest.approx(1 + stall / (measured - stall), rel=0.1)


def test_each_timed_piece_is_a_row_of_its_own() -> None:
    s = _mtp_log().segments[3]
    curve = Curve(KNOTS)
    rows = segment_rows(s, curve)
    assert len(rows) == 4  # the forward, the pass, the call, the rest
    assert sum(sec for sec, _ in rows) == pytest.approx(s.seconds)
    assert rows[-1][1].keys() == {"loop_s", "round_s", "save_s", "restore_s", "line_s"}
    # a build that times no piece: one row of all but the drafter's passes, which it
    # cannot see apart (their cost is in the round's)
    untimed = replace(s, forward_s=None, pass_s=None, draft_s=None)
    (seconds, whole), = segment_rows(untimed, curve)
    assert seconds == s.seconds and whole == features(untimed, curve)
    assert features(s, curve).keys() - whole.keys() == {pass_term(MTP), pass_token_term(MTP)}


def test_a_forwards_fixed_cost_is_charged_per_node_of_the_graph_it_runs() -> None:
    fit = fit_log(replace(_ngram_log(), graph_nodes=600))
    seg = Segment(0, 0.0, ((5, 500), (3, 500)), None, 0, 1, 1, True, rebuilt=(True, True))
    full = predict_segment(fit, seg)
    assert predict_segment(fit, seg, 600) == pytest.approx(full)
    fixed = 2 * (fit.value("launch_s") + fit.value("rebuild_s")) * fit.level
    assert predict_segment(fit, seg, 450) == pytest.approx(full - fixed / 4, rel=1e-9)
    unprinted = replace(fit, graph_nodes=None)
    assert predict_segment(unprinted, seg, 450) == pytest.approx(full)
    other = replace(_ngram_log(seed=5), graph_nodes=300)
    assert predict_tok_s(fit, other)[1] > predict_tok_s(fit, replace(other, graph_nodes=600))[1]


def test_the_profile_charges_a_plain_round_and_a_forward_as_the_fit_does() -> None:
    clock = replace(_ngram_log(), state_bytes=116908)
    fit = fit_log(clock)
    profile = to_profile(fit, "fitted", "a test", clock)
    assert profile.state_bytes == 116908 and profile.rs_seq_s == 0.0  # no graph printed
    assert profile.forward_knots == fit.curve.knots
    lines = statistics.median(s.lines for s in clock.segments if not s.speculative)
    plain = Segment(0, 0.0, ((1, 500),), None, 0, 0, 0, False, rebuilt=(False,),
                    lines=int(lines))
    assert profile.verify_s(1, 500) == pytest.approx(predict_segment(fit, plain), rel=1e-9)
    for b in (2, 9, 130, 700):  # every cost times the log's level (its stalls)
        assert profile.forward_s(b, 0) - profile.forward_s(1, 0) == pytest.approx(
            fit.level * (forward_s(fit, b) - forward_s(fit, 1)), rel=1e-9)
    assert profile.checkpoint_s() == pytest.approx(fit.level * fit.value("save_s"), rel=1e-9)


def test_the_profile_moves_the_forwards_fixed_cost_with_the_states_a_server_keeps() -> None:
    # Fitted at n_rs_seq 8 on a 629-node graph of 6 recurrent layers: each kept position is
    # 3 nodes a layer, so a server keeping none pays launch_s x 485 / 629 a forward.
    clock = replace(_mtp_log(), graph_nodes=629, n_rs_seq=8, recurrent_layers=6)
    fit = fit_log(clock)
    profile = to_profile(fit, "fitted", "a test", clock)
    launch = fit.value("launch_s") * fit.level
    assert profile.launch_rs_seq == 8
    assert profile.rs_seq_s == pytest.approx(launch * 18 / 629)
    none = profile.keeping(0)
    assert none.forward_s(1, 0) == pytest.approx(profile.forward_s(1, 0) - launch * 144 / 629)
    plain = Segment(0, 0.0, ((1, 500),), None, 0, 0, 0, False, rebuilt=(False,), lines=15)
    # the sim's plain round: the profile's launch (the round's own cost: the fit log's
    # plain rounds print 15 lines) and the curve
    assert none.verify_s(1, 500) == pytest.approx(predict_segment(fit, plain, 485), rel=1e-9)


SHAPE = ModelShape(n_layer=8, nextn_layers=1, n_embd=128, n_vocab=259, params=2.0e6)


def test_an_mtp_head_the_log_never_ran_is_derived_from_the_models_shape() -> None:
    clock = _ngram_log()
    clock.shape = SHAPE
    fit = fit_log(clock)
    term = fit.terms[draft_term(MTP)]
    assert term.status == "derived" and term.source == SHAPE.describe()
    share = SHAPE.mtp_share()
    assert term.value == pytest.approx(share * forward_s(fit, 1))
    assert fit.terms[pass_term(MTP)].status == "derived"
    ran = _mtp_log()
    ran.shape = SHAPE
    assert fit_log(ran).terms[draft_term(MTP)].status == "fitted"


def test_the_curves_columns_interpolate_between_its_knots() -> None:
    curve = Curve((1, 2, 9, 400))
    assert curve.features(1) == {"launch_s": 1.0}
    assert curve.features(5) == {"launch_s": 1.0, slope_term(1, 2): 1.0, slope_term(2, 9): 3.0}
    # beyond the last knot its slope goes on; below the first a forward is charged in
    # proportion to its tokens
    assert curve.features(500)[slope_term(9, 400)] == 491.0
    assert Curve((4, 9)).features(2) == {"launch_s": 0.5}
