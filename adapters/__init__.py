"""Third-party engines specledger observes but does not own (llama.cpp, vLLM): each adapter
starts the server, drives the conversation, reads what it reports and turns it into events."""
