"""specledger package."""
