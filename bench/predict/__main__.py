"""`python -m bench.predict`: the command, a bad option or input one line and exit status 2."""

import sys

from bench.predict import main

try:
    sys.exit(main())
except ValueError as err:
    print(f"bench.predict: {err}", file=sys.stderr)
    sys.exit(2)
