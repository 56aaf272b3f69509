"""The batched-schedule throughput suite (`specledger bench batching`) as a script:
aggregate tok/s against 1, 2, 4 and 8 slots for plain decoding and each rollback strategy,
on the sim's Qwen3.5-27B / H200 profile and on the shipped model, and the slot count at
which speculation stops paying.

    .venv/bin/python bench/batching.py [--quick] [--out DIR | --record] [--db PATH] [--threads N]

Writes <out>/batching/results.json, results.md and the throughput plot; prints the tables.
"""

from specbench.common import main

if __name__ == "__main__":
    main("batching", __doc__)
