"""The command line: one module per command, each declaring its arguments cheaply and
loading what it runs only when it runs."""
