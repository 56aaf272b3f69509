"""vLLM's CPU build beside llama.cpp and our engine: where its environment lives (`paths`,
installed by tools/install_vllm.sh), the OpenAI server specledger starts and drives, and
what it reports turned into ledger events. vLLM runs in its own virtual environment, never
in specledger's: nothing here imports vllm."""
