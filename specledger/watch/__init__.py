"""`specledger watch`: a flight recorder for a live llama-server log, as a row of stages
that loop.py runs in turn at each poll. The intake reads and cuts the log into requests
(intake.py: the follower reads the file as `tail -F` does, follower.py; the stream cuts it
into whole records, stream.py; the request recorder folds them through the import's own
fold and ledger, requests.py); the optional answers stage follows the clients' answers
(answering.py, answers.py); each request is judged by the postmortem's detectors
(findings.py), kept (keep.py: a session each, store.py, or held in the ring until a finding
fires, ring.py; old sessions pruned, prune.py) and reported (report.py: a line or JSON, the
--on-finding hook, the Prometheus metrics, metrics.py). options.py holds what a watch is
told, tally.py what it did."""
