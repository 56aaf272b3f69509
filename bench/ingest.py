"""The ledger at fleet scale: 8 writer processes recording into one PostgreSQL ledger at
once and 4 into one SQLite file, each beside one writer alone; aggregate events/s, and
every session checked whole afterwards (`specledger bench ingest`). Needs the PostgreSQL
server binaries (apt-get install postgresql); it starts a throwaway server of its own.

    .venv/bin/python bench/ingest.py [--quick] [--out DIR | --record]

Writes <out>/ingest/results.json, results.md and the plot (PNG and SVG).
"""

from specbench.common import main

if __name__ == "__main__":
    main("ingest", __doc__)
