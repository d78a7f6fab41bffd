#!/usr/bin/env bash
# The scaling model against a finished scaling study of ResNet-20 on emulated nodes of one rank
# (issue 14, "Validation"): calibrate on the study's data, fit the fabric to the comm-bench files
# of tools/bench_advisor.sh, predict the study's weak and strong series, and let scaletrain-report
# put prediction and measurement side by side (its "Prediction against measurement" section).
#
#   tools/advisor/validate_study.sh STUDY_DIR DATA_DIR INTRA.json INTER.json WEAK_BATCH GLOBAL_BATCH OUT_DIR
#
# e.g. after `ctest -R slurm.slurm_study` in build/:
#   tools/advisor/validate_study.sh build/test-tmp/slurm_study/study build/test-tmp/slurm_study/data \
#     /tmp/benchadv/intra.json /tmp/benchadv/inter.json 16 32 /tmp/study-validation
set -euo pipefail
[ $# -eq 7 ] || { sed -n '2,12p' "$0" >&2; exit 2; }
study=$1 data=$2 intra=$3 inter=$4 weak=$5 global=$6 out=$7
bin=$(cd "$(dirname "$0")/../.." && pwd)/build/bin
mkdir -p "$out"
OMP_NUM_THREADS=1 "$bin/scaletrain-advisor" calibrate --model resnet20 --batches 8,16,32 --threads 1 --steps 10 \
  --data "$data" --output "$out/calibration.json" >&2
predict() {  # SCALING BATCH
  "$bin/scaletrain-advisor" predict --calibration "$out/calibration.json" --comm-bench "$intra" "$inter" \
    --gpus-per-node 1 --gpus 1,2 --batch "$2" --scaling "$1" --json "$out/advice-$1.json" >/dev/null
}
predict weak "$weak"
predict strong "$global"
"$bin/scaletrain-report" "$study" --output "$out/report" --prediction "$out/advice-weak.json" \
  --prediction "$out/advice-strong.json" >&2
sed -n '/^## Prediction against measurement/,/points compared/p' "$out/report/scaling.md"
