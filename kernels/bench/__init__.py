"""Measurement code behind ``bench/kernels_gpu.py``: timing, checks, cases, report."""
