#!/usr/bin/env bash
# tools/fuzz.sh SECONDS [TARGET...]: runs the fuzz targets (shard jpeg checkpoint ini; default
# all) for SECONDS each under ASan and UBSan with the seeded mutation driver, in the sanitize
# build folder (BUILD_SANITIZE, default build-sanitize; configured and built here if needed, as
# `make test-sanitize` does). The corpus is made afresh by tests/fuzz/make_corpus.sh. Writes one
# JSON line per target (counts per outcome, runs per second, the recipes of findings) to the
# summary file it names at the end; full sanitizer reports go to the reports-<target>/ folders
# beside it. Env: SEED (default 1), TIMEOUT (per input, seconds, default 20), JOBS (default 2).
# Exit code 1 when any target had a finding (sanitizer report, signal, hang, unclear error).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:?usage: tools/fuzz.sh SECONDS [TARGET...]}
shift
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(shard jpeg checkpoint ini)
B=${BUILD_SANITIZE:-build-sanitize}
SEED=${SEED:-1}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/sanitize/lsan.supp}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

[ -f "$B/CMakeCache.txt" ] || cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSCALETRAIN_CUDA=OFF \
  -DSCALETRAIN_SANITIZE=address,undefined
cmake --build "$B" -j "${JOBS:-2}" --target scaletrain scaletrain-data $(printf 'fuzz_%s ' "${TARGETS[@]}")

stamp=$(date +%Y%m%d-%H%M%S)
OUT=$PWD/$B/fuzz/run-$stamp
SUMMARY=$OUT/summary.jsonl
mkdir -p "$OUT"
bash tests/fuzz/make_corpus.sh "$PWD/$B/bin" "$OUT/corpus"
rc=0
for t in "${TARGETS[@]}"; do
  "$B/bin/fuzz_$t" --corpus "$OUT/corpus/$t" --seed "$SEED" --seconds "$SECONDS_EACH" --timeout "${TIMEOUT:-20}" \
    --summary "$SUMMARY" --reports "$OUT/reports-$t" || rc=1
done
echo "fuzz.sh: summaries in $SUMMARY"
exit $rc
