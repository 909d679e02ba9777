"""A workload's profile measured on this machine: one module a concern, `python -m
emulator.profile` the command line.

- options: the command line's options, checked, and the request they make;
- child: the child inside its CPU group, timing the worker's own step and loop;
- children: the measuring of a share: children started in CPU groups, and their results;
- figures: the profile's figures reduced from the children's readings (pure);
- reading: a committed profile read again on this machine and used as measured;
- rounds: a whole profile, or a reading, as a round of children;
- document: the profile document, new or updated, and its writing;
- blocks: `python -m emulator.profiling.blocks`, a profile's blocks (the pipeline's units)
  measured in block children (block_child, block_measure) and added to it (block_document).
"""
