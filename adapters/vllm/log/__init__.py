"""Reading the logs vLLM's OpenAI server prints (any version's V1 engine, forks' too) into
interval runs (adapters/logs/intervals/): `lines.py` its line grammar, `stats.py` its
periodic stats lines, `run.py` one server run, `reader.py` a file cut into runs."""
