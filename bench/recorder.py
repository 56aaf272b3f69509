"""What recording costs: events/s, projection speed, bytes per event, and the overhead of
recording on a sim run and on the real engine (`specledger bench recorder`).

    .venv/bin/python bench/recorder.py [--quick] [--out DIR | --record] [--db PATH] [--threads N]

Writes <out>/recorder/results.json, results.md and the plot (PNG and SVG).
"""

from specbench.common import main

if __name__ == "__main__":
    main("recorder", __doc__)
