"""The llama.cpp build matrix and the known incidents each build, or any banner, is exposed to."""
