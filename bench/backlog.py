"""A watch catching up on a 1 GiB `-v` backlog of a real llama-server's runs, rotated three
times while it reads: every request recorded exactly once, nothing said lost; how long it
took and the watch's peak memory (`specledger bench backlog`). Needs make llama.

    .venv/bin/python bench/backlog.py [--quick] [--out DIR | --record]

Writes <out>/backlog/results.json and results.md.
"""

from specbench.common import main

if __name__ == "__main__":
    main("backlog", __doc__)
