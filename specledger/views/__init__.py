"""What presents sessions: console tables and JSON, analysis printing, graphs, the HTML
report."""
