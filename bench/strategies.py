"""The rollback-strategy comparison suite (`specledger bench strategies`) as a script:
checkpoint vs per_token vs input_replay (and none) over acceptance x draft length, on the
sim's large profiles and on the real engine on this CPU.

    .venv/bin/python bench/strategies.py [--quick] [--out DIR | --record] [--db PATH] [--threads N]

Writes <out>/strategies/results.json, results.md and the plots; prints the tables.
"""

from specbench.common import main

if __name__ == "__main__":
    main("strategies", __doc__)
