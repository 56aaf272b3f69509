"""The drafters suite (`specledger bench drafters`) as a script: what each drafter's
acceptance buys. On the real engine on this CPU, plain decode and every drafter
(ngram-simple, ngram-map-k, ngram-mod, draft-model, mtp, ngram-mod,mtp) over one code
conversation with `input_replay`, interleaved and repeated (the fastest run counts):
acceptance, accepted per round, tok/s, speedup over plain, draft time share, lossless. On
the sim at Qwen3.5-27B / H200, the synthetic drafter's speedup curve over acceptance at
draft 4 and 8.

    .venv/bin/python bench/drafters.py [--quick] [--out DIR | --record] [--db PATH] [--threads N]

Writes <out>/drafters/results.json, results.md and acceptance_vs_speedup.png/.svg; prints
the tables.
"""

from specbench.common import main

if __name__ == "__main__":
    main("drafters", __doc__)
