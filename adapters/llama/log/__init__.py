"""Reading a llama-server log: its runs, its line kinds, the facts and the tasks they hold."""
