"""Projection, postmortem and diff of a 1M-event session (median wall time of 3 each) and
of a 10M-event session (peak RSS), each analysis in a process of its own
(`specledger bench scale`). Needs about 2 GB of free disk for the 10M-event SQLite file.

    .venv/bin/python bench/scale.py [--quick] [--out DIR | --record]

Writes <out>/scale/results.json and results.md.
"""

from specbench.common import main

if __name__ == "__main__":
    main("scale", __doc__)
