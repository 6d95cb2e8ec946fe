#!/bin/bash
# One benchmark config on one model in 4 shards, one array task each (docs/sharding.md). Submit it, then merge once
# every task has finished:
#   jobid=$(sbatch --parsable docs/recipes/slurm_array.sh)
#   sbatch --dependency=afterok:$jobid --wrap "culture-probe merge shards/* --out run"
# Arguments after the script's name go to `culture-probe run` (e.g. --data-dir dlama-v1/ --batch-tokens 8192).
# A task that is requeued or run again continues its shard (--resume); a shard never resumes another's folder.
#SBATCH --job-name=culture-probe
#SBATCH --array=1-4
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=4
#SBATCH --time=04:00:00
#SBATCH --output=logs/%x_%a.out
set -euo pipefail

CONFIG=${CONFIG:-fmlama_en}       # a config, or several / a group: each task then runs a suite's shard
MODEL=${MODEL:-bigscience/bloom-560m}
SHARDS=${SHARDS:-4}               # the N of --shard K/N: as many as --array has tasks
OUT=${OUT:-shards}

culture-probe run $CONFIG --model "$MODEL" --shard "${SLURM_ARRAY_TASK_ID}/${SHARDS}" \
  --out "$OUT/${SLURM_ARRAY_TASK_ID}" --resume "$@"
