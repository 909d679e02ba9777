"""The lab: what serves only the research into local predictions on this VM, apart from the
product (emulator/, provisioner/).

- anchor: a profile moved part of the way to a reading of the machine's speed of the moment
  (the weight and the drift band fitted on the benchmark grid's rows);
- catalog_anchor: the catalog's loop and load figures read again for a round of bench.predict;
- catalog_from_runs (`python -m bench.lab.catalog_from_runs`): the local catalog's prediction
  interval, slack and start-up cores fitted to this machine's finished runs (interval, slack,
  init_cores, finished_runs).
"""
