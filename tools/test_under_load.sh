#!/usr/bin/env bash
# `make test` N times in a row (default 5) beside one CPU-bound busy loop per core, stopping at
# the first failure: the proof that no test depends on how fast (or idle) the machine is.
# Usage: tools/test_under_load.sh [RUNS]   (run it in a fresh clone; logs in /tmp/load-*.log)
set -u
runs=${1:-5}
loaders=()
for _ in $(seq "$(nproc)"); do python3 -c "while True: pass" & loaders+=($!); done
trap 'kill "${loaders[@]}" 2>/dev/null' EXIT
echo "load: ${#loaders[@]} busy loops on $(nproc) cores"
for i in $(seq "$runs"); do
  start=$(date +%s)
  make test > "/tmp/load-$i.log" 2>&1; rc=$?
  echo "run $i: exit $rc in $(( $(date +%s) - start )) s, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  [ "$rc" -ne 0 ] && exit "$rc"
done
