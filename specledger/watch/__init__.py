"""`specledger watch`: a flight recorder for a live llama-server log. The follower reads
the file as `tail -F` does (follower.py), the stream cuts it into whole records
(stream.py), the request recorder folds them into requests through the import's own
fold and ledger (requests.py), each completed request becomes a session (store.py), the
postmortem's detectors judge it as it lands (findings.py), and the counters are served to
Prometheus (metrics.py); in ring mode only the last rounds of each slot are kept, and
written when a finding fires (ring.py). loop.py drives them; pruning is prune.py."""
