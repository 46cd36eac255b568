#!/bin/sh
# Stands in for the sidecar's Python in benchmarks/api_load.py (c.LocalLauncher.python).
#
# The scheduler's launcher runs `<this> -m elastic_gpu_sidecar run --job-id ID --generation G
# --gpus ... --scheduler-url URL ...` with the job's secret in ELASTIC_GPU_JOB_SECRET: exactly
# what a real sidecar gets. This records the secret and the arguments (NUL-separated, written
# then renamed, so a reader never sees half of it) for the benchmark's synthetic sidecar client,
# which then heartbeats through the real route; it stays alive as a `sleep`, so the scheduler
# sees a live sidecar process, and ends by itself after ELASTIC_GPU_BENCH_HOLD_S seconds.
set -e
dir="${ELASTIC_GPU_BENCH_LAUNCHES:?set ELASTIC_GPU_BENCH_LAUNCHES}"
printf '%s\0' "$ELASTIC_GPU_JOB_SECRET" "$@" > "$dir/.$$.tmp"
mv "$dir/.$$.tmp" "$dir/$$.launch"
exec sleep "${ELASTIC_GPU_BENCH_HOLD_S:-600}"
