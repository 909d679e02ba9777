"""`python -m bench.predict`: the command, a bad option or input one line and exit status 2."""

import sys

from bench.predict import command

sys.exit(command())
