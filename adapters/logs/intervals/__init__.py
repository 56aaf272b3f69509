"""Interval sessions, for every engine whose log reports aggregates over intervals and
batches rather than rounds (vLLM, SGLang): a server run as the reader saw it (`run.py`)
and its session (`record.py`: interval events, requests as turns, the run's failures)."""
