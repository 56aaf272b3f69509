"""Fitting cost terms to a log's segments: synthetic segments of known terms are
recovered; a term the log never exercises is absent, one it cannot tell apart from
others is fixed and names them; a scheduler stall is dropped, not fitted; the profile
the fit gives the sim charges what the fit charges."""

import numpy as np
import pytest

from adapters.llama.logclock import LogClock, Prompt, Segment, TaskClock
from adapters.llama.logfit import (
    draft_term,
    features,
    fit_log,
    fit_prompts,
    predict_segment,
    predict_tok_s,
    to_profile,
)

TRUE = {"launch_s": 2.0e-3, "token_s": 0.6e-3, "ctx_token_s": 1.0e-6,
        "round_s": 0.4e-3, "save_s": 0.15e-3, "restore_s": 0.25e-3,
        draft_term("draft-mtp"): 0.3e-3}


def _segment(rng: np.random.Generator, ctx: int, kind: str, noise: float) -> Segment:
    """A round of `kind` (plain, ngram with checkpoints, mtp) charged the TRUE terms."""
    draft = int(rng.integers(1, 9))
    if kind == "plain":
        s = Segment(0, 0.0, ((1, ctx),), None, 0, 0, 0, False)
    elif kind == "mtp":
        s = Segment(0, 0.0, ((draft + 1, ctx),), "draft-mtp", draft, 0, 0, True)
    else:
        restore = bool(rng.integers(0, 2))
        replay = ((int(rng.integers(1, draft + 1)) + 1, ctx),) if restore else ()
        s = Segment(0, 0.0, ((draft + 1, ctx), *replay), None, 0, 1, int(restore), True)
    seconds = sum(TRUE.get(n, 0.0) * v for n, v in features(s).items())
    return Segment(s.task, seconds * (1 + noise * rng.standard_normal()), s.forwards,
                   s.drafter, s.drafted, s.saves, s.restores, s.speculative)


def _clock(kinds: tuple[str, ...], n: int = 60, noise: float = 0.0, seed: int = 0,
           ctx_step: int = 40) -> LogClock:
    rng = np.random.default_rng(seed)
    segs = tuple(_segment(rng, 100 + ctx_step * (i % 60), kinds[i % len(kinds)], noise)
                 for i in range(n))
    total = sum(s.seconds for s in segs)
    return LogClock(tasks=[TaskClock(0, segs, total, n, total)],
                    prompts=[Prompt(0, t, 5e-3 + t * 0.35e-3) for t in (100, 400, 700)])


def test_exact_segments_give_back_every_term() -> None:
    fit = fit_log(_clock(("plain", "ngram", "mtp")))
    for name, value in TRUE.items():
        assert fit.terms[name].status == "fitted"
        assert fit.value(name) == pytest.approx(value, rel=1e-6), name
    assert fit.value("prefill_token_s") == pytest.approx(0.35e-3)
    assert fit.value("prefill_s") == pytest.approx(5e-3)
    assert fit.decode is not None and fit.decode.max_abs < 1e-9


def test_noisy_segments_recover_the_terms_within_their_spread() -> None:
    fit = fit_log(_clock(("plain", "ngram", "mtp"), n=300, noise=0.05, seed=3))
    for name in ("launch_s", "token_s", "save_s", "restore_s"):
        t = fit.terms[name]
        assert t.spread is not None and t.spread > 0
        assert abs(t.value - TRUE[name]) < 4 * t.spread, name
    assert fit.decode is not None and 0.02 < fit.decode.rms < 0.1


def test_a_plain_log_has_no_speculative_terms_and_one_token_per_forward() -> None:
    fit = fit_log(_clock(("plain",)))
    for name in ("save_s", "restore_s", "round_s"):
        assert fit.terms[name].status == "absent"
    # every forward is one token: the per-token cost is the round's fixed cost
    assert fit.terms["token_s"].status == "unseparated"
    assert fit.terms["token_s"].carried_by == ("launch_s",)
    assert fit.value("launch_s") == pytest.approx(TRUE["launch_s"] + TRUE["token_s"], rel=1e-3)


def test_a_checkpoint_on_every_speculative_round_is_not_a_round_cost_of_its_own() -> None:
    fit = fit_log(_clock(("plain", "ngram")))
    assert fit.terms["round_s"].status == "unseparated"
    assert fit.terms["round_s"].carried_by == ("save_s",)
    assert fit.value("save_s") == pytest.approx(TRUE["save_s"] + TRUE["round_s"], rel=1e-6)


def test_contexts_of_one_size_leave_the_context_read_to_the_fixed_cost() -> None:
    fit = fit_log(_clock(("plain", "ngram", "mtp"), ctx_step=2))
    assert fit.terms["ctx_token_s"].status == "unseparated"
    assert "launch_s" in fit.terms["ctx_token_s"].carried_by


def test_a_stall_is_dropped_not_fitted() -> None:
    clock = _clock(("plain", "ngram", "mtp"), n=120, noise=0.01, seed=1)
    segs = list(clock.tasks[0].segments)
    s = segs[10]
    segs[10] = Segment(s.task, s.seconds + 0.2, s.forwards, s.drafter, s.drafted, s.saves,
                       s.restores, s.speculative)
    clock.tasks[0] = TaskClock(0, tuple(segs), 1.0, 120, 1.0)
    fit = fit_log(clock)
    assert fit.decode is not None and fit.decode.dropped >= 1
    assert fit.value("launch_s") == pytest.approx(TRUE["launch_s"], rel=0.05)


def test_one_prompt_leaves_the_fixed_cost_unseparated() -> None:
    terms, res = fit_prompts([Prompt(0, 400, 0.2)])
    assert terms["prefill_s"].status == "unseparated"
    assert terms["prefill_token_s"].value == pytest.approx(0.2 / 400)
    assert terms["prefill_token_s"].spread is None  # no degree of freedom left
    assert res.rows == 1


def test_the_profile_charges_a_plain_round_as_the_fit_does() -> None:
    fit = fit_log(_clock(("plain", "ngram", "mtp")))
    profile = to_profile(fit, "fitted", "a test", state_bytes=116908)
    plain = Segment(0, 0.0, ((1, 500),), None, 0, 0, 0, False)
    assert profile.verify_s(1, 500) == pytest.approx(predict_segment(fit, plain), rel=1e-9)
    assert profile.checkpoint_s() == pytest.approx(TRUE["save_s"], rel=1e-6)
    assert profile.round_sync_s == pytest.approx(TRUE["round_s"], rel=1e-6)
    measured, predicted = predict_tok_s(fit, _clock(("plain", "ngram", "mtp"), seed=5))
    assert predicted == pytest.approx(measured, rel=1e-6)
