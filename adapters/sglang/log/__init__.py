"""SGLang server logs: the line formats (`fields.py`, `args.py`, `patterns.py`), one server
run read a line at a time (`run.py`), a file cut into runs (`reader.py`)."""
