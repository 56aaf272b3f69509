"""What runs sessions: our engine's observed siblings (llama-server, vLLM), re-execution,
scenarios, and the import of server logs."""
