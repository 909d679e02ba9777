"""One parameter-server shard: BSP aggregation and SGD-with-momentum over a slice of the model.

Run as `python -m functions.ps --job-id J --shard 0 --shards 2 --workers 4 --port 0 ...`; it prints
`READY host:port` on stdout once it listens.

State: the shard's parameters for the current iteration t, the parameters of t-1 (kept so a
worker that resumes one iteration behind can still compute its gradient for t-1), the momentum
buffer, and the gradients received for iteration t (one buffer per rank, received into
directly and summed in one cache-blocked pass together with the update once all n are in).
Rules that make restarts safe:

- a gradient for an iteration already applied (i < t), or a second gradient from the same rank
  for the current iteration, is ignored: a worker that died after pushing and recomputes the same
  deterministic batch changes nothing;
- when all n ranks have pushed for t, the average is applied exactly as torch.optim.SGD does
  (buf = momentum·buf + g; p = p − lr·buf, dampening 0, no Nesterov, no weight decay) and t += 1;
- PULL(i) waits until t ≥ i and serves the parameters of i (t or t-1);
- checkpoints (params, momentum, t) go to S3 every N iterations and on request; at start the
  shard restores the newest iteration that *every* shard of the job has checkpointed, so shards
  restarted together agree.

The PS never sees the model: the first authenticated worker sends its shard of the (seeded,
deterministic) initial parameters (INIT). Threads, one per connection: recv_into and numpy
releases the GIL, so the shard keeps up with loopback speeds.

When only some shards restart (a crashed process, a rebooted instance), they come back at the
newest common checkpoint while their peers are further on. A worker that sees shards more than
one iteration apart sends ROLLBACK: every shard reloads that same checkpoint (a no-op for those
already there), drops its other connections so every worker re-syncs, and training repeats the
iterations since the checkpoint with the same deterministic batches. After each checkpoint a
shard deletes its own checkpoints older than the newest common one, so the rollback target is
always there.

The shard never stops accepting: an accept() that fails for lack of file descriptors
(EMFILE/ENFILE) is retried with a back-off and logged once, and at most `max_unauthenticated`
connections may sit in the handshake (each for at most `handshake_timeout_s`; a new one evicts
the oldest), so idle or slow peers cannot exhaust the descriptors. `python -m functions.ps_health`
is the liveness check (a connection must be answered with a CHALLENGE).

A shard serves one run of the job at a time (functions/runs.py): the first HELLO naming a run
enters it, restoring that run's own newest common checkpoint (`<prefix>/<run id>/...`), if any;
a HELLO of a run that started later forgets the parameters, drops the other connections and
enters the newer run; a HELLO or request of an older run is refused. An instance outlives its
runs, so a re-run never resumes the previous run's final iteration.

Each checkpoint carries an HMAC-SHA256 over its key and bytes with the job secret (S3 user
metadata); one that does not verify is refused, logged with its key, and moved aside to
`<key>.rejected`, so every shard's listing skips it and the shard falls back to the newest
common checkpoint that verifies, or starts fresh (waits for INIT) if none does.

Known limit: a periodic checkpoint is uploaded by the thread that completed the iteration, so
it delays that one worker's next pull.

The parts: `config` (PSConfig), `state` (the shard's state and `sgd_momentum`), `checkpoints`
(the S3 format and its HMAC, write, restore, rollback, prune), `handshake` (CHALLENGE, HELLO,
WELCOME), `connections` (the open connections and the handshake cap), `server` (accepting and
serving connections), `cli` (flags and `main`).
"""

from functions.ps.cli import main

__all__ = ["main"]
