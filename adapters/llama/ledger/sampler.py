"""The sampler, in our terms, on both sides of a llama-server request: what a run asks for
(every parameter llama-server would otherwise fill with its own defaults, sent, and the
chain in our order), and what the server's log says it sampled with (its `sampler chain`
and `sampler params` lines, trace level: -v), so the two can be compared.

Our engine (engine/sampling.py) applies the temperature, then top-k, then top-p, and nothing
else. llama-server's default chain is penalties, DRY, top-n-sigma, top-k, typical, top-p,
min-p, XTC, temperature, with top_k 40, top_p 0.95 and min_p 0.05 unless a request says
otherwise (common/common.h): a request that sends only temperature, top_k, top_p and seed
samples from a cut distribution. A sampler llama.cpp builds idle (its parameters make it a
no-op) prints with a `?` and does not act.
"""

from typing import Any

from adapters.llama.log.records import SamplerChain, SamplerParams

# llama.cpp's samplers (as its chain prints them) by the name of our parameter.
_OURS = {"temp-ext": "temperature", "temp": "temperature", "top-k": "top_k",
         "top-p": "top_p", "min-p": "min_p"}
DRAW = "dist"  # the chain's last step draws from what the others left

# Every request parameter that changes llama-server's distribution, at the value that
# makes its sampler idle (tools/server/server-common.cpp params_from_json_cmpl).
_IDLE = {"min_p": 0.0, "typical_p": 1.0, "repeat_penalty": 1.0, "dry_multiplier": 0.0,
         "xtc_probability": 0.0, "top_n_sigma": -1.0, "mirostat": 0, "dynatemp_range": 0.0}
# Our order, in llama-server's sampler names (`samplers` of a request).
OUR_ORDER = ("temperature", "top_k", "top_p")


def claimed(temperature: float, top_k: int, top_p: float) -> dict[str, Any]:
    """The sampler a session of ours says it samples with, in the terms `used` gives:
    the parameters, nothing else acting, and the order of what acts."""
    order = ["temperature"] if temperature != 1.0 else []
    order += ["top_k"] if top_k else []
    order += ["top_p"] if top_p < 1.0 else []
    return {"temperature": temperature, "top_k": top_k, "top_p": top_p, "min_p": 0.0,
            "others": [], "order": order}


def request_fields(temperature: float, top_k: int, top_p: float, seed: int
                   ) -> tuple[dict[str, Any], dict[str, Any]]:
    """A chat request's sampling fields: (OpenAI's own, llama.cpp's `extra_body`), every
    one sent so that no server default is left to act."""
    openai = {"temperature": temperature, "top_p": top_p, "seed": seed,
              "presence_penalty": 0.0, "frequency_penalty": 0.0}
    # top_k 0 keeps every token, as ours does.
    return openai, {"top_k": top_k, **_IDLE, "samplers": list(OUR_ORDER)}


def used(chain: SamplerChain | None, params: SamplerParams | None) -> dict[str, Any] | None:
    """What the log says a task sampled with, in `claimed`'s terms (None: the log, without
    -v, does not say): an idle sampler's parameter is the value that leaves it idle;
    `others` are the acting samplers we have no parameter for; `chain` is the log's own."""
    if chain is None or params is None:
        return None
    acting = [s for s in chain.active if s != DRAW]

    def value(sampler: str, name: str, idle: float) -> float:
        v = params.get(name)
        return idle if sampler not in acting or v is None else v

    return {
        "temperature": params.get("temp"),
        "top_k": int(value("top-k", "top_k", 0)),
        "top_p": value("top-p", "top_p", 1.0),
        "min_p": value("min-p", "min_p", 0.0),
        "others": [s for s in acting if s not in _OURS],
        # The acting samplers we have a parameter for, by that name, in chain order.
        "order": list(dict.fromkeys(_OURS[s] for s in acting if s in _OURS)),
        "chain": list(chain.active),
    }
