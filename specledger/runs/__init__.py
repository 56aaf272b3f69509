"""What runs sessions: the engines we observe (llama-server, vLLM) driven through one
runner, the import of their logs, re-execution, the scenarios and the demo."""
