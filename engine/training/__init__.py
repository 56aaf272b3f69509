"""Training and evaluation of the shipped models on the Python standard library."""
