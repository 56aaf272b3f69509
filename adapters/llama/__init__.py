"""llama.cpp's llama-server beside our engine: where the build lives (`paths`), GGUF
export of our checkpoints (`gguf_export`, `convert`), a server that specledger owns
(`options`, `server`, `client`); the differential test of engines is adapters/differential.py.
Nothing here imports torch at import time."""
