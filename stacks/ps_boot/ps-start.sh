#!/bin/bash
# Starts this instance's PS shard in its container, in the foreground. systemd runs it on every
# boot and again 10 s after it exits (lambdadnn-ps.service). Until a run has opened the job's
# interface endpoints (ECR, logs, the secret) a step below fails and systemd tries again: the
# PS comes up when a run needs it, and nothing bills by the hour in between.
set -euo pipefail
# shellcheck source=/dev/null
. "${LAMBDADNN_PS_ENV:-/etc/lambdadnn-ps.env}"

# The image is pulled once; later boots (each run starts the stopped instance) reuse it.
if ! docker image inspect "$IMAGE_URI" >/dev/null 2>&1; then
  aws ecr get-login-password --region "$REGION" --cli-connect-timeout 5 \
    | docker login --username AWS --password-stdin "$REGISTRY"
  docker pull "$IMAGE_URI"
fi
docker rm -f ps >/dev/null 2>&1 || true
# The health check SIGTERMs a PS that listens but no longer greets (functions/ps_health.py);
# the PS checkpoints, exits, and systemd starts it again.
exec docker run --rm --name ps --network host \
  --log-driver awslogs --log-opt "awslogs-region=$REGION" \
  --log-opt "awslogs-group=$LOG_GROUP" --log-opt "awslogs-stream=ps-$SHARD" \
  --health-cmd "$PS_HEALTH_CMD" --health-interval 30s --health-timeout 30s \
  --health-retries 3 --health-start-period 300s \
  -e "AWS_REGION=$REGION" --entrypoint "$PS_ENTRYPOINT" "$IMAGE_URI" "${PS_ARGS[@]}"
