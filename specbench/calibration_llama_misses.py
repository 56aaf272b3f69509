"""Why a held-out prediction of `specledger calibrate`'s check misses the band, read off
the fit and the two logs (specbench/calibration_llama_logs.py writes it under its table):
a drafter the fit log never ran (its drafting charged 0, or derived from the model's
shape; its pass after each forward likewise), speculative checkpoints the fit log never
saved or restored (charged 0), plain rounds charged a speculative round's
fixed cost, a drafting server's plain rounds predicting a server without a drafter, or the
setting's own runs spreading beyond the band."""

from dataclasses import dataclass

from adapters.llama.logclock import LogClock
from adapters.llama.logfit import MTP


@dataclass(frozen=True)
class Miss:
    """A setting a fit predicts outside the band: the fit, the setting, the error and
    the reasons the logs give (none found: `unexplained`)."""

    fit: str
    setting: str
    error: float
    reasons: tuple[str, ...]


def miss_reasons(fit_clock: LogClock, clock: LogClock, noise: float, band: float
                 ) -> tuple[str, ...]:
    """What the logs say about a prediction of `clock` from the fit of `fit_clock` that
    misses: each a short clause; `noise` is the setting's runs' spread."""
    out = []
    unseen = sorted({s.drafter for s in clock.segments if s.drafter}
                    - {s.drafter for s in fit_clock.segments if s.drafter})
    out += [f"{d}'s drafting is not in the fit log ("
            + ("derived from the model's shape)" if d == MTP and fit_clock.shape else
               "charged 0)") for d in unseen]
    fit_passes = {s.pass_drafter for s in fit_clock.segments if s.pass_s}
    out += [f"{d}'s pass after each forward is not in the fit log ("
            + ("derived from the model's shape)" if d == MTP and fit_clock.shape else
               "charged 0)") for d in sorted({s.pass_drafter for s in clock.segments if s.pass_s
                             and s.pass_drafter} - fit_passes)]
    ckpt = (sum(s.saves for s in clock.segments), sum(s.restores for s in clock.segments))
    if any(ckpt) and not any(s.saves or s.restores for s in fit_clock.segments):
        out.append(f"its rounds save {ckpt[0]} and restore {ckpt[1]} speculative "
                   "checkpoints, which the fit log never did (charged 0)")
    plain = any(not s.speculative for s in clock.segments)
    fit_plain = any(not s.speculative for s in fit_clock.segments)
    if plain and not fit_plain:
        out.append("the fit log's rounds are all speculative, so a speculative round's "
                   "fixed cost (round_s: " + ("" if fit_passes else "the drafter's pass "
                   "after each verify, ") + "the verify's per-position states and the "
                   "hidden states the drafter reads) stays in launch_s and each plain round "
                   "is charged it")
    if fit_plain and not any(s.speculative for s in clock.segments):
        out.append("the fit log's plain rounds ran beside a drafter (a lookup and its "
                   "update each round), which a server without one does not pay")
    if noise > band:
        out.append(f"its own runs spread {100 * noise:.0f}%, beyond the band")
    return tuple(out)


def misses_text(misses: list[Miss]) -> str:
    """The misses as markdown lines, one per fit and setting."""
    return "\n".join(f"- {m.setting} from the {m.fit} log ({100 * m.error:+.1f}%): "
                     + ("; ".join(m.reasons) if m.reasons else "unexplained by the logs")
                     for m in misses)
