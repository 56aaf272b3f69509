"""The log `specledger calibrate` is best fitted on: one llama-server whose own rounds
hold as many of the costs the other settings of its build pay as one server can, apart.

A server that drafts every round (draft-mtp at a fixed draft size) never runs a plain
forward, and its verify batch is always the same size: the fixed cost of a speculative
round cannot be told from a forward's, nor a token's from either (adapters/llama/calibration/fit.py
names them unseparated). llama-server 0.3.36 takes no per-request speculative settings
(tools/server/server-schema.cpp keeps `speculative.n_max` behind `#if 0`), so the mix must
come from the server's own flags: draft-mtp under `--spec-draft-p-min P` stops drafting
at the first token the MTP head gives less than P (common/speculative.cpp,
common_speculative_impl_draft_mtp::draft), so the same server verifies drafts of every
size up to its `--spec-draft-n-max` and, where even the first token falls short, runs a
plain round (its unanswered call timed apart: adapters/llama/calibration/clock.py). One such log
holds plain forwards, verify batches of several sizes, forwards that reuse their graph
beside forwards of a new batch that rebuild it, the MTP head's drafting and its pass after
each forward. What it cannot hold: a forward of a server without MTP, whose context copies
no per-position recurrent states and costs less (docs/design.md#llama-forward-costs).

What a user runs on their own machine (with requests of their own workload):

    llama-server -m MODEL.gguf -v --log-timestamps --log-prefix --log-file calib.log \\
        --spec-type draft-mtp --spec-draft-n-max 8 --spec-draft-p-min 0.4
    specledger calibrate calib.log --out my-box.json

`bench calibration --backend llama` records this server as a fit log beside the others
(specbench/calibration/llama/logs.py).
"""



DRAFT = 8
"""The recipe's `--spec-draft-n-max`: the largest draft the settings it predicts verify,
so their batches lie inside the log's, not beyond them."""
P_MIN = 0.4
"""The MTP head's confidence below which the recipe's server stops drafting: on the shipped
model a quarter of its rounds stay plain and its drafts run 1 to 8 tokens, where at 0.7
more than half stay plain and no draft runs beyond 3."""


def recipe_flags(p_min: float) -> list[str]:
    """The flags the recipe adds to a draft-mtp server's."""
    return ["--spec-draft-p-min", f"{p_min:g}"]
