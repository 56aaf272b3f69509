"""`specledger watch --vllm-log` / `--sglang-log`: the watch of an engine's log that
reports intervals (vLLM's stats lines, SGLang's batch lines). The follower reads the file
as for llama-server; the engine's own reader, fed line by line, splits it into server runs
(lines.py); each run is a session written as the log shows it (live.py); a run's failure
is reported once its lines are read, the rest of its postmortem when it ends
(findings.py); loop.py drives them."""
