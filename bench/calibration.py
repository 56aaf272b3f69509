"""Fit the sim's cost model to the torch backend on this machine and store it as the
profile `hybrid-tiny-cpu-measured` (`specledger bench calibration`).

    .venv/bin/python bench/calibration.py [--quick] [--out DIR | --record] [--db PATH]
                                          [--threads N]

Writes <out>/calibration/results.json, results.md, the profile JSON and the plot (PNG and
SVG); a recorded run (--record, a full one) writes them into bench/results/ and also
engine/sim/profiles/hybrid-tiny-cpu-measured.json.
Prints the fitted constants, the fit error per operation and the validation errors.
"""

from specbench.common import main

if __name__ == "__main__":
    main("calibration", __doc__)
