"""This machine measured as a platform: one module a concern, `python -m emulator.calibrate` the
command line.

- fits: latency and bandwidth from times per size (pure);
- timing: how a probe times an action, every size once a round;
- ps_probe, s3_probe, runner_probe, cpu_probe: the probes, each against the project's real
  pieces on 127.0.0.1;
- measurements: every probe run once, gathered in one record;
- catalog: the local catalog document built from that record, and its writing.
"""
