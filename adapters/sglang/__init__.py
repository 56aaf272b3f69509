"""SGLang: its server logs read into runs and typed records (`log/`). SGLang needs a GPU and
is not installed here, so the logs users published and synthetic lines are what the reader
is tested on (docs/sglang.md)."""
