"""Our models as llama.cpp's GGUF files: export, comparison, conversion, shape."""
