"""The incidents suite (`specledger bench incidents`) as a script: every known llama.cpp
incident's scenario (adapters/llama/builds/scenarios.py) on every built build of the
matrix (adapters/llama/builds/matrix.py), recorded and read by the postmortem: the table incident x
build, each cell named / clean / not reproducible on CPU (why) / absent in this build /
not built, with its sessions. Needs the builds (`specledger llama build VERSION`).

    .venv/bin/python bench/incidents.py [--quick] [--out DIR | --record] [--db PATH]

Writes <out>/incidents/results.json, results.md and incidents.md; prints the table.
"""

from specbench.common import main

if __name__ == "__main__":
    main("incidents", __doc__)
