"""The llama suite (`specledger bench llama`) as a script: llama.cpp's llama-server and
our engine side by side on the same weights (the shipped target with its MTP head and the
draft model, exported to f32 GGUF), one thread each, the same held-out prompts, greedy:
plain decode tokens/s, and tokens/s and acceptance per drafter (none, mtp / draft-mtp,
ngram-simple, ngram-map-k, ngram-mod, draft-model / draft-simple), interleaved and
repeated (the fastest pass counts); every answer checked against plain decode's and
llama.cpp's plain answers against ours. Needs `make llama`.

    .venv/bin/python bench/llama.py [--quick] [--out DIR | --record] [--db PATH] [--threads N]

Writes <out>/llama/results.json, results.md and llama_vs_ours.png/.svg; prints the table.
"""

from specbench.common import main

if __name__ == "__main__":
    main("llama", __doc__)
