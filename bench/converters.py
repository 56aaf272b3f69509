"""The converters suite (`specledger bench converters`) as a script: every built llama.cpp
build of the matrix exports the shipped target and draft model with its own GGUF
converter; each export is compared with the default build's (metadata keys added, removed
and changed, tensors, the largest difference of each tensor's values), and each build's
llama-server answers the same held-out prompts greedily (32 tokens, no drafter) on every
GGUF it loads, against the default build's server on its own GGUF (itself checked against
our torch engine on the checkpoint). Unbuilt builds are skipped, said so; a refusal to
load is a result, with the server's last error line. Needs `make llama` (and
`specledger llama build VERSION` for the others).

    .venv/bin/python bench/converters.py [--quick] [--out DIR | --record] [--threads N]

Writes <out>/converters/results.json, results.md and converters.md; prints the table.
"""

from specbench.common import main

if __name__ == "__main__":
    main("converters", __doc__)
