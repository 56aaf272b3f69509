"""A llama-server log's own clock, and the cost profile fitted from it."""
