"""Fitting cost terms to a log's segments: synthetic segments of known terms are
recovered; a term the log never exercises is absent, one it cannot tell apart from
others is fixed and names them; a scheduler stall is dropped, not fitted; the profile
the fit gives the sim charges what the fit charges; a drafter's call timed on its own is
fitted apart, and a per-token cost the rounds cannot separate is taken from the
prompt lines, saying so; a drafter's pass after each forward timed on its own is a term
of its own, left out of a server without a drafter; an MTP head the log never ran is
charged its share of the forward by the model's shape; a forward's fixed cost is charged
per node of the graph it runs."""

from dataclasses import replace

import numpy as np
import pytest

from adapters.llama.logclock import LogClock, Prompt, Segment, TaskClock
from adapters.llama.logfit import (
    MTP,
    PINNED_TOKEN,
    call_term,
    draft_term,
    features,
    fit_log,
    fit_prompts,
    fit_rows,
    pass_term,
    predict_segment,
    predict_tok_s,
    to_profile,
)
from adapters.llama.modelshape import ModelShape

TRUE = {"launch_s": 2.0e-3, "token_s": 0.6e-3, "ctx_token_s": 1.0e-6,
        "round_s": 0.4e-3, "save_s": 0.15e-3, "restore_s": 0.25e-3,
        draft_term("draft-mtp"): 0.3e-3}


CALL = 0.2e-3  # draft-mtp's fixed cost per call, where the log times its call apart


def _segment(rng: np.random.Generator, ctx: int, kind: str, noise: float,
             drafts: tuple[int, int] = (1, 8)) -> Segment:
    """A round of `kind` (plain, ngram with checkpoints, mtp; `mtp-timed`: its drafting
    timed apart and charged `CALL` more) charged the TRUE terms; draft sizes within
    `drafts`."""
    draft = int(rng.integers(drafts[0], drafts[1] + 1))
    if kind == "mtp-timed":
        s = Segment(0, 0.0, ((draft + 1, ctx),), "draft-mtp", draft, 0, 0, True)
        drafting = TRUE[draft_term("draft-mtp")] * draft
        forward = sum(TRUE.get(n, 0.0) * v for n, v in features(s).items()) - drafting
        draft_s = CALL + drafting
        return Segment(0, (draft_s + forward) * (1 + noise * rng.standard_normal()), s.forwards,
                       s.drafter, s.drafted, 0, 0, True, draft_s=draft_s)
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


PREFILL_TOKEN_S = 0.35e-3


def _clock(kinds: tuple[str, ...], n: int = 60, noise: float = 0.0, seed: int = 0,
           ctx_step: int = 40, drafts: tuple[int, int] = (1, 8),
           prefill_token_s: float = PREFILL_TOKEN_S) -> LogClock:
    rng = np.random.default_rng(seed)
    segs = tuple(_segment(rng, 100 + ctx_step * (i % 60), kinds[i % len(kinds)], noise,
                          drafts) for i in range(n))
    total = sum(s.seconds for s in segs)
    return LogClock(tasks=[TaskClock(0, segs, total, n, total)],
                    prompts=[Prompt(0, t, 5e-3 + t * prefill_token_s) for t in (100, 400, 700)])


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
    # every forward is one token: the rounds cannot tell the per-token cost from the
    # round's fixed cost, so the prompt lines give it, and the fixed cost is the rest
    token = fit.terms["token_s"]
    assert token.status == "pinned" and token.source == PINNED_TOKEN
    assert token.value == fit.value("prefill_token_s") == pytest.approx(PREFILL_TOKEN_S)
    assert fit.value("launch_s") == pytest.approx(
        TRUE["launch_s"] + TRUE["token_s"] - PREFILL_TOKEN_S, rel=1e-3)


def test_a_log_without_prompt_lines_leaves_an_unseparated_token_cost_to_the_fixed_one() -> None:
    clock = _clock(("plain",))
    clock.prompts = []
    fit = fit_log(clock)
    assert fit.terms["token_s"].status == "unseparated"
    assert fit.terms["token_s"].carried_by == ("launch_s",)
    assert fit.value("launch_s") == pytest.approx(TRUE["launch_s"] + TRUE["token_s"], rel=1e-3)


def test_a_timed_drafter_call_is_two_rows_an_untimed_one_is_one() -> None:
    timed = _segment(np.random.default_rng(0), 400, "mtp-timed", 0.0)
    rows = fit_rows(timed)
    assert [sorted(r) for _, r in rows] == [
        sorted((draft_term("draft-mtp"), call_term("draft-mtp"))),
        sorted(("launch_s", "token_s", "ctx_token_s", "save_s", "restore_s", "round_s",
                "rebuild_s"))]
    assert rows[0][0] == timed.draft_s
    assert sum(sec for sec, _ in rows) == pytest.approx(timed.seconds)
    untimed = _segment(np.random.default_rng(0), 400, "mtp", 0.0)
    assert fit_rows(untimed) == [(untimed.seconds, features(untimed))]


def test_timed_drafting_gives_the_drafters_own_costs() -> None:
    fit = fit_log(_clock(("plain", "mtp-timed")))
    assert fit.value(draft_term("draft-mtp")) == pytest.approx(TRUE[draft_term("draft-mtp")])
    assert fit.value(call_term("draft-mtp")) == pytest.approx(CALL)
    for name in ("launch_s", "token_s", "round_s", "ctx_token_s"):
        assert fit.terms[name].status == "fitted"
        assert fit.value(name) == pytest.approx(TRUE[name], rel=1e-6), name


def test_one_draft_size_pins_the_per_token_cost_from_the_prompt_lines() -> None:
    # every round drafts 4 and verifies 5: the rounds' per-token cost is their fixed
    # cost's; with the prompts' per-token cost equal to the forward's, the fit is exact
    fit = fit_log(_clock(("mtp-timed",), drafts=(4, 4), prefill_token_s=TRUE["token_s"]))
    assert fit.terms["token_s"].status == "pinned"
    assert fit.value("token_s") == pytest.approx(TRUE["token_s"])
    assert fit.terms["round_s"].status == "unseparated"  # every round is speculative
    assert fit.value("launch_s") == pytest.approx(TRUE["launch_s"] + TRUE["round_s"])
    assert fit.value("ctx_token_s") == pytest.approx(TRUE["ctx_token_s"])
    # one draft size: the call's fixed cost is spread over its 4 tokens
    assert fit.terms[call_term("draft-mtp")].status == "unseparated"
    assert 4 * fit.value(draft_term("draft-mtp")) == pytest.approx(
        4 * TRUE[draft_term("draft-mtp")] + CALL)


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
    clock = replace(_clock(("plain", "ngram", "mtp")), state_bytes=116908)
    fit = fit_log(clock)
    profile = to_profile(fit, "fitted", "a test", clock)
    assert profile.state_bytes == 116908 and profile.rs_seq_s == 0.0  # no graph printed
    plain = Segment(0, 0.0, ((1, 500),), None, 0, 0, 0, False)
    assert profile.verify_s(1, 500) == pytest.approx(predict_segment(fit, plain), rel=1e-9)
    assert profile.checkpoint_s() == pytest.approx(TRUE["save_s"], rel=1e-6)
    assert profile.round_sync_s == pytest.approx(TRUE["round_s"], rel=1e-6)
    measured, predicted = predict_tok_s(fit, _clock(("plain", "ngram", "mtp"), seed=5))
    assert predicted == pytest.approx(measured, rel=1e-6)


PASS = 0.5e-3  # a drafter's pass after each forward, where the log times it


def _passed(s: Segment, passes: int) -> Segment:
    """`s` with `passes` timed passes of draft-mtp after its forwards, each `PASS`."""
    return Segment(s.task, s.seconds + passes * PASS, s.forwards, s.drafter, s.drafted,
                   s.saves, s.restores, s.speculative, s.draft_s,
                   pass_s=(PASS,) * passes, pass_drafter=MTP)


def test_each_timed_pass_is_a_row_of_its_own() -> None:
    s = _passed(_segment(np.random.default_rng(0), 400, "mtp-timed", 0.0), 2)
    rows = fit_rows(s)
    assert rows[:2] == [(PASS, {pass_term(MTP): 1.0})] * 2
    assert sum(sec for sec, _ in rows) == pytest.approx(s.seconds)
    assert features(s)[pass_term(MTP)] == 2.0


def test_timed_passes_leave_the_bare_forward_and_a_plain_server_pays_none() -> None:
    # an all-speculative log: every round drafts, verifies and passes once
    rng = np.random.default_rng(3)
    segs = tuple(_passed(_segment(rng, 100 + 40 * i, "mtp-timed", 0.0, (1, 8)), 1)
                 for i in range(40))
    total = sum(s.seconds for s in segs)
    fit = fit_log(LogClock(tasks=[TaskClock(0, segs, total, 40, total)],
                           prompts=[Prompt(0, t, 5e-3 + t * TRUE["token_s"])
                                    for t in (100, 400, 700)]))
    assert fit.terms[pass_term(MTP)].status == "fitted"
    assert fit.value(pass_term(MTP)) == pytest.approx(PASS)
    plain = Segment(0, 0.0, ((1, 500),), None, 0, 0, 0, False)
    # round_s is not separable from launch_s here, but the pass is no longer in either
    assert predict_segment(fit, plain) == pytest.approx(
        TRUE["launch_s"] + TRUE["round_s"] + TRUE["token_s"] + 501 * TRUE["ctx_token_s"])


SHAPE = ModelShape(n_layer=8, nextn_layers=1, n_embd=128, n_vocab=259, params=2.0e6)


def test_an_mtp_head_the_log_never_ran_is_derived_from_the_models_shape() -> None:
    clock = _clock(("plain", "ngram"))
    clock.shape = SHAPE
    fit = fit_log(clock)
    term = fit.terms[draft_term(MTP)]
    assert term.status == "derived" and term.source == SHAPE.describe()
    share = SHAPE.mtp_share()
    assert term.value == pytest.approx(share * (TRUE["launch_s"] + TRUE["token_s"]))
    # its pass after a forward of 5 tokens: its share of that forward
    passing = _passed(Segment(0, 0.0, ((5, 500),), MTP, 4, 0, 0, True), 1)
    assert fit.terms[pass_term(MTP)].status == "derived"
    assert predict_segment(fit, passing) - predict_segment(fit, replace(
        passing, pass_s=None)) == pytest.approx(share * (TRUE["launch_s"] + 5 * TRUE["token_s"]))
    mtp = Segment(0, 0.0, ((5, 500),), MTP, 4, 0, 0, True)
    assert predict_segment(fit, mtp) > predict_segment(
        fit, Segment(0, 0.0, ((5, 500),), None, 0, 0, 0, True))
    ran = _clock(("plain", "ngram", "mtp"))
    ran.shape = SHAPE
    assert fit_log(ran).terms[draft_term(MTP)].status == "fitted"


def test_the_prompt_lines_give_the_targets_forward_without_the_drafters_pass() -> None:
    prompts = [Prompt(0, t, 5e-3 + t * PREFILL_TOKEN_S + t * 0.1e-3, pass_s=t * 0.1e-3)
               for t in (100, 400, 700)]
    terms, _ = fit_prompts(prompts)
    assert terms["prefill_token_s"].value == pytest.approx(PREFILL_TOKEN_S)
    assert terms["prefill_s"].value == pytest.approx(5e-3)


def _attempt(ctx: int) -> Segment:
    """A plain round whose draft-mtp call drafted nothing (`--spec-draft-p-min`): the
    forward's TRUE terms, and the call's fixed cost timed apart."""
    s = Segment(0, 0.0, ((1, ctx),), None, 0, 0, 0, False)
    forward = sum(TRUE.get(n, 0.0) * v for n, v in features(s).items())
    return Segment(0, forward + CALL, s.forwards, MTP, 0, 0, 0, False, draft_s=CALL)


def test_plain_rounds_beside_drafts_of_several_sizes_separate_the_speculative_round() -> None:
    # the recipe's log: MTP drafts of 1 to 4 tokens, and plain rounds that still called it
    rng = np.random.default_rng(5)
    segs = tuple(_attempt(100 + 40 * i) if i % 3 == 0
                 else _segment(rng, 100 + 40 * i, "mtp-timed", 0.0, (1, 4)) for i in range(60))
    total = sum(s.seconds for s in segs)
    fit = fit_log(LogClock(tasks=[TaskClock(0, segs, total, 60, total)]))
    assert all(fit.terms[n].status == "fitted" for n in ("launch_s", "token_s", "round_s"))
    for n in ("launch_s", "token_s", "round_s"):
        assert fit.value(n) == pytest.approx(TRUE[n], rel=1e-6)
    assert fit.value(call_term(MTP)) == pytest.approx(CALL, rel=1e-6)
    # a server without a drafter: its plain round pays neither the call nor round_s
    plain = Segment(0, 0.0, ((1, 500),), None, 0, 0, 0, False)
    assert predict_segment(fit, plain) == pytest.approx(
        TRUE["launch_s"] + TRUE["token_s"] + 501 * TRUE["ctx_token_s"], rel=1e-6)


REBUILD = 0.25e-3  # a graph built and allocated anew: the forward's batch changed


def _with_rebuilds(clock: LogClock, every: int) -> LogClock:
    """The clock's segments with one rebuild on every `every`-th, charged `REBUILD`."""
    segs = tuple(replace(s, seconds=s.seconds + REBUILD, rebuilds=1) if i % every == 0 else s
                 for i, s in enumerate(clock.segments))
    total = sum(s.seconds for s in segs)
    return replace(clock, tasks=[TaskClock(0, segs, total, len(segs), total)])


def test_forwards_that_rebuilt_their_graph_are_charged_apart() -> None:
    clock = _with_rebuilds(_clock(("plain", "ngram", "mtp"), n=120), every=2)
    fit = fit_log(clock)
    assert fit.terms["rebuild_s"].status == "fitted"
    assert fit.value("rebuild_s") == pytest.approx(REBUILD, rel=1e-3)
    assert fit.value("launch_s") == pytest.approx(TRUE["launch_s"], rel=1e-3)
    reused = Segment(0, 0.0, ((1, 500),), None, 0, 0, 0, False)
    rebuilt = replace(reused, rebuilds=1)
    assert predict_segment(fit, rebuilt) - predict_segment(fit, reused) == pytest.approx(
        REBUILD, rel=1e-3)


def test_a_log_that_rarely_rebuilds_leaves_the_cost_in_the_launch() -> None:
    clock = _with_rebuilds(_clock(("plain", "ngram", "mtp"), n=120), every=60)
    term = fit_log(clock).terms["rebuild_s"]
    assert (term.status, term.value, term.carried_by) == ("unseparated", 0.0, ("launch_s",))


def test_a_forwards_fixed_cost_is_charged_per_node_of_the_graph_it_runs() -> None:
    # A target keeping per-position states runs a larger graph (n_rs_seq's copies are
    # nodes): a log of a smaller graph is charged launch_s and restore_s in proportion,
    # its per-token and checkpoint costs as fitted.
    fit = fit_log(replace(_clock(("plain", "ngram")), graph_nodes=600))
    assert fit.graph_nodes == 600
    ngram = Segment(0, 0.0, ((5, 500), (3, 500)), None, 0, 1, 1, True)
    full = predict_segment(fit, ngram)
    assert predict_segment(fit, ngram, 600) == pytest.approx(full)
    fixed = fit.value("launch_s") + fit.value("restore_s")
    assert predict_segment(fit, ngram, 450) == pytest.approx(full - fixed / 4, rel=1e-9)
    unprinted = replace(fit, graph_nodes=None)
    assert predict_segment(unprinted, ngram, 450) == pytest.approx(full)
    other = replace(_clock(("plain", "ngram"), seed=5), graph_nodes=300)
    tokens = sum(t.eval_tokens for t in other.tasks)
    seconds = sum(predict_segment(fit, s, 300) for s in other.segments)
    assert predict_tok_s(fit, other)[1] == pytest.approx(tokens / seconds)
    assert predict_tok_s(fit, other)[1] > predict_tok_s(fit, replace(other, graph_nodes=600))[1]


def test_the_profile_moves_the_forwards_fixed_cost_with_the_states_a_server_keeps() -> None:
    # Fitted at n_rs_seq 8 on a 629-node graph of 6 recurrent layers: each kept position is
    # 3 nodes a layer, so a server keeping none pays launch_s x 485 / 629 a forward.
    clock = replace(_clock(("plain", "mtp")), graph_nodes=629, n_rs_seq=8, recurrent_layers=6)
    fit = fit_log(clock)
    profile = to_profile(fit, "fitted", "a test", clock)
    launch = fit.value("launch_s")
    assert profile.launch_s == launch and profile.launch_rs_seq == 8
    assert profile.rs_seq_s == pytest.approx(launch * 18 / 629)
    assert profile.keeping(0).launch_s == pytest.approx(launch * 485 / 629)
    plain = Segment(0, 0.0, ((1, 500),), None, 0, 0, 0, False)
    assert profile.keeping(0).verify_s(1, 500) == pytest.approx(
        predict_segment(fit, plain, 485), rel=1e-9)
