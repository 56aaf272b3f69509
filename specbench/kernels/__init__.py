"""The Triton kernels' GPU check and benchmark behind `bench/kernels_gpu.py`: the checks
against the torch reference (`checks.py`), the timers (`timing.py`), the measurements
(`measure.py`) and the goals and markdown (`report.py`)."""
