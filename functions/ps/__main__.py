"""`python -m functions.ps ...`: one shard, in the foreground (the flags: functions/ps/cli.py)."""

import os
import sys

from functions.ps.cli import main

if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
