"""Running llama-server: its flags per build, the cache of builds, the process and its client."""
