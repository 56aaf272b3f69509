"""The conversation suite (`specledger bench conversation`) as a script: a long first turn
and many short follow-ups, under the `legacy` and `truncate` EOG policies, on the sim at
Qwen3.5-27B / H200 scale (20 turns, 16,000-token answers) and on the real engine on this
CPU; per turn boundary re-prefill, restores and conversation cost.

    .venv/bin/python bench/conversation.py [--quick] [--out DIR | --record] [--db PATH]
                                           [--threads N]

Writes <out>/conversation/results.json, results.md and the plots; prints the tables.
"""

from specbench.common import main

if __name__ == "__main__":
    main("conversation", __doc__)
