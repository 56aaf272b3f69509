"""An acceptance pattern replayed through a cost profile (engine/sim/forecast.py)."""

from dataclasses import replace

import pytest

from engine.sim.costs import get_profile
from engine.sim.forecast import Mode, Round, expected_rounds, forecast, recut

PROFILE = get_profile("rtx3090-qwen3.5-27b-q4-llama")


def test_rounds_without_drafts_cost_plain_decoding_in_every_mode() -> None:
    rounds = [Round(ctx=100 + i, drafted=0, accepted=0) for i in range(5)]
    f = forecast(PROFILE, rounds)
    assert f.tokens == 5
    assert all(f.seconds[m] == pytest.approx(f.seconds[Mode.PLAIN]) for m in Mode)


def test_host_checkpoints_cost_their_tensor_copies_and_a_replay_on_reject() -> None:
    full, rejected = Round(ctx=64, drafted=4, accepted=4), Round(ctx=64, drafted=4, accepted=1)
    f_full, f_rej = forecast(PROFILE, [full]), forecast(PROFILE, [rejected])
    device = replace(PROFILE, checkpoint_place="device")
    save = PROFILE.checkpoint_s() - device.checkpoint_s()
    assert f_full.seconds[Mode.HOST] - f_full.seconds[Mode.DEVICE] == pytest.approx(save)
    assert f_rej.seconds[Mode.HOST] - f_rej.seconds[Mode.DEVICE] == pytest.approx(2 * save)
    assert save > PROFILE.state_tensors * PROFILE.tensor_copy_s > 0
    replay = PROFILE.forward_s(2, 64)
    assert f_rej.seconds[Mode.DEVICE] - f_full.seconds[Mode.DEVICE] == pytest.approx(
        device.checkpoint_s() + replay)
    assert f_rej.tokens == 2 and f_full.tokens == 5


def test_recut_caps_drafts_and_kept_drafts() -> None:
    rounds = [Round(10, 8, 8), Round(20, 8, 2), Round(30, 0, 0)]
    assert recut(rounds, 3) == [Round(10, 3, 3), Round(20, 3, 2), Round(30, 0, 0)]
    with pytest.raises(ValueError, match="draft_max"):
        recut(rounds, -1)


@pytest.mark.parametrize(("draft", "acceptance"), [(1, 0.5), (3, 0.75), (6, 0.2), (4, 1.0)])
def test_expected_rounds_keep_the_asked_share_of_drafts(draft: int, acceptance: float) -> None:
    rounds, weights = expected_rounds(draft, acceptance, 0)
    assert sum(weights) == pytest.approx(1.0)
    kept = sum(w * r.accepted for r, w in zip(rounds, weights, strict=True))
    assert kept / draft == pytest.approx(acceptance, abs=1e-9)


def test_only_per_position_states_pay_their_copies_on_every_forward() -> None:
    # A profile fitted on a server keeping 8 per-position states: plain decoding and the
    # checkpointing modes keep none, n_rs_seq mode keeps the pattern's largest draft.
    per = PROFILE.launch_s / 100
    fitted = replace(PROFILE, rs_seq_s=per, launch_rs_seq=8)
    rounds = [Round(ctx=64, drafted=4, accepted=2), Round(ctx=80, drafted=2, accepted=2)]
    f = forecast(fitted, rounds)
    base = forecast(replace(PROFILE, launch_s=PROFILE.launch_s - 8 * per), rounds)
    for mode in (Mode.PLAIN, Mode.HOST, Mode.DEVICE):
        assert f.seconds[mode] == pytest.approx(base.seconds[mode])
    forwards = len(rounds)  # one verify a round, no replay
    assert f.seconds[Mode.ROLLBACK] - base.seconds[Mode.ROLLBACK] == pytest.approx(
        forwards * 4 * per)
    assert fitted.keeping(8) == fitted
    assert fitted.plain_decode_s(64, 3) == pytest.approx(fitted.keeping(0).plain_decode_s(64, 3))
    assert fitted.plain_decode_s(64, 3) < replace(fitted, rs_seq_s=0.0).plain_decode_s(64, 3)
