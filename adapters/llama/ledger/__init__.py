"""A llama-server log's tasks fired through the round machine as a session, and what the
session stores of its source."""
