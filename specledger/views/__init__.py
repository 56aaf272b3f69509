"""What presents sessions: console tables and JSON, divergences and findings, graphs, the
HTML report, calibration fits and forecasts."""
