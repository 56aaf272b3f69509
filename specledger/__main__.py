"""`python -m specledger` is the CLI."""

import sys

from specledger.cli import main

sys.exit(main())
