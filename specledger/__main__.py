"""`python -m specledger` is the CLI."""

import sys

from specledger.entry import main

sys.exit(main())
