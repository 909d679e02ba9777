"""Property tests draw the same examples on every run, so the landing gate turns red for a
change and never for a new draw; `make explore` draws fresh examples to hunt for what breaks
(a falsifying example it finds goes into the test as an @example)."""

import os

from hypothesis import settings

settings.register_profile("gate", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False, database=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "gate"))
