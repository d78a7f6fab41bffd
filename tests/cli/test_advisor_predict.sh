#!/usr/bin/env bash
# scaletrain-advisor predict (issue 14): its output for the shipped DGX-1 machine file and a
# ResNet-50 calibration, checked by tests/advisor/check_advice.py against values recomputed from
# the formulas of docs/scaling-model.md (written from the doc alone, not from src/advisor/), and
# against points worked by hand for the fixture calibration tests/advisor/resnet50-v100-mixed-
# handcheck.json; also share/advisor/calibrations/resnet50-v100-mixed-mlperf.json where it exists,
# a strong series that does not start at 1 GPU, forced algorithms, a host-staged machine, and the
# user errors (non-zero exit, a message naming the option, file or value).
source "$(dirname "$0")/lib.sh"
SRC=${ST_SOURCE:-.}
T=$TMP_ROOT/advisor_predict
rm -rf "$T" && mkdir -p "$T"
A=$BIN/scaletrain-advisor
CHECK=("$PY" "$SRC/tests/advisor/check_advice.py")
DGX1=$SRC/share/advisor/machines/dgx1-4xedr.json
FIXTURE=$SRC/tests/advisor/resnet50-v100-mixed-handcheck.json
SHIPPED=$SRC/share/advisor/calibrations/resnet50-v100-mixed-mlperf.json

echo "== help"
out=$("$A" --help)
grep -qF "docs/scaling-model.md" <<<"$out" || fail "scaletrain-advisor --help does not point to docs/scaling-model.md: $out"
grep -qF "predict" <<<"$out" || fail "scaletrain-advisor --help does not list predict: $out"
out=$("$A" predict --help)
for opt in --calibration --machine --comm-bench --gpus --batch --scaling --efficiency --budget-nodes --algorithm --json; do
  grep -qF -- "$opt" <<<"$out" || fail "predict --help does not mention $opt"
done

# predict_and_check NAME CHECK_OPTIONS -- PREDICT_OPTIONS: runs predict with --json, then
# check_advice.py on its JSON with the same machine, calibration and options.
predict_and_check() {
  local name=$1 machine=$2 calibration=$3
  shift 3
  local check_opts=()
  while [ "$1" != "--" ]; do check_opts+=("$1"); shift; done
  shift
  "$A" predict --calibration "$calibration" --machine "$machine" --json "$T/$name.json" "$@" >"$T/$name.txt" ||
    fail "$name: predict exited $?: $(cat "$T/$name.txt")"
  grep -qF "largest count at >=" "$T/$name.txt" || fail "$name: no largest-count line in the table: $(cat "$T/$name.txt")"
  "${CHECK[@]}" --machine "$machine" --calibration "$calibration" --advice "$T/$name.json" "${check_opts[@]}" ||
    fail "$name: the advisor's JSON disagrees with docs/scaling-model.md (above)"
}

echo "== DGX-1, fixture calibration: both series, a 2-node budget, and the hand-worked points"
predict_and_check fixture "$DGX1" "$FIXTURE" --budget-nodes 2 --hand-worked -- --budget-nodes 2
grep -qF "sharing 16 GPUs (2 nodes)" "$T/fixture.txt" || fail "no sharing table for 2 nodes: $(cat "$T/fixture.txt")"

if [ -f "$SHIPPED" ]; then
  echo "== DGX-1, the shipped ResNet-50 calibration: both series and a 2-node budget"
  predict_and_check shipped "$DGX1" "$SHIPPED" --budget-nodes 2 -- --budget-nodes 2 --scaling both
else
  echo "(no $SHIPPED: only the fixture calibration)"
fi

echo "== a strong series from 2 GPUs that ends below one sample per GPU, and another threshold"
predict_and_check strong2 "$DGX1" "$FIXTURE" --scaling strong --gpus 2,8,24,80 --batch 32 --efficiency 0.45 -- \
  --scaling strong --gpus 2,8,24,80 --batch 32 --efficiency 0.45
grep -qF "ends at 24 GPUs" "$T/strong2.txt" || fail "strong series from 2 GPUs at 32 does not end at 24: $(cat "$T/strong2.txt")"

echo "== forced algorithms"
predict_and_check ring "$DGX1" "$FIXTURE" --algorithm ring --scaling weak --gpus 1,2,8,16,64,640 -- \
  --algorithm ring --scaling weak --gpus 1,2,8,16,64,640
# A machine whose hierarchical all-reduce stages through the host (host_copy_GBps > 0), 3 ranks on
# a node (not a power of two), and a 4-node budget.
"$PY" - "$DGX1" "$T/host-staged.json" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
m["host_copy_GBps"] = 12
m["name"] = "DGX-1 with host-staged MPI across nodes (test)"
json.dump(m, open(sys.argv[2], "w"))
EOF
predict_and_check hier "$T/host-staged.json" "$FIXTURE" --algorithm hierarchical --scaling both --gpus 1,3,8,16,32,640 \
  --budget-nodes 4 --batch 64 -- --algorithm hierarchical --scaling both --gpus 1,3,8,16,32,640 --budget-nodes 4 --batch 64
predict_and_check hostauto "$T/host-staged.json" "$FIXTURE" --gpus 1,8,16,128 --batch 96 -- --gpus 1,8,16,128 --batch 96

echo "== user errors"
# Each case runs once, all of them at the same time (the advisor takes ~0.4 s to start, most of it
# waiting, not computing); then each must have exited non-zero with every listed string in its
# output. refuse NAME PATTERN... -- CMD...
echo 'not json {' >"$T/not-json.json"
echo '[]' >"$T/empty-bench.json"
cases=()
refuse() {
  local name=$1 id=${#cases[@]} pats=()
  shift
  while [ "$1" != "--" ]; do pats+=("$1"); shift; done
  shift
  cases+=("$name")
  printf '%s\n' "${pats[@]}" >"$T/err$id.patterns"
  (rc=0; timeout 60 "$@" >"$T/err$id.out" 2>&1 || rc=$?; echo "$rc" >"$T/err$id.rc") &
}
P=("$A" predict)
refuse "no --calibration" --calibration -- "${P[@]}"
refuse "calibration file missing" "$T/nope.json" -- "${P[@]}" --calibration "$T/nope.json"
refuse "calibration not JSON" "$T/not-json.json" "not JSON" -- "${P[@]}" --calibration "$T/not-json.json"
refuse "machine file is a calibration" "$FIXTURE" scaletrain-machine -- "${P[@]}" --calibration "$FIXTURE" --machine "$FIXTURE"
refuse "calibration file is a machine" "$DGX1" scaletrain-calibration -- "${P[@]}" --calibration "$DGX1"
refuse "machine file missing" "$T/nope-machine.json" -- "${P[@]}" --calibration "$FIXTURE" --machine "$T/nope-machine.json"
refuse "--scaling bogus" --scaling bogus -- "${P[@]}" --calibration "$FIXTURE" --scaling bogus
refuse "--efficiency 0" --efficiency -- "${P[@]}" --calibration "$FIXTURE" --efficiency 0 --json "$T/never.json"
refuse "--efficiency 1.5" --efficiency 1.5 -- "${P[@]}" --calibration "$FIXTURE" --efficiency 1.5
refuse "--gpus 4,2 (not increasing)" --gpus -- "${P[@]}" --calibration "$FIXTURE" --gpus 4,2
refuse "--gpus 12 on 8-GPU nodes" 12 "whole nodes" -- "${P[@]}" --calibration "$FIXTURE" --gpus 12
refuse "--gpus 0,8" --gpus -- "${P[@]}" --calibration "$FIXTURE" --gpus 0,8
refuse "--algorithm bogus" bogus -- "${P[@]}" --calibration "$FIXTURE" --algorithm bogus
refuse "--comm-bench with --machine" --comm-bench --machine -- "${P[@]}" --calibration "$FIXTURE" --machine "$DGX1" \
  --comm-bench "$T/empty-bench.json"
refuse "--budget-nodes 0" --budget-nodes -- "${P[@]}" --calibration "$FIXTURE" --budget-nodes 0
refuse "unknown command" bogus -- "$A" bogus
wait
for id in "${!cases[@]}"; do
  name=${cases[$id]} rc=$(cat "$T/err$id.rc") out=$(cat "$T/err$id.out")
  [ "$rc" -ne 0 ] || fail "$name: exited 0, expected an error: $out"
  [ "$rc" -ne 124 ] || fail "$name: hung (killed after 60 s)"
  while IFS= read -r pat; do
    grep -qF -- "$pat" <<<"$out" || fail "$name: message does not mention '$pat': $out"
  done <"$T/err$id.patterns"
  echo "ok: $name (exit $rc)"
done
[ ! -e "$T/never.json" ] || fail "a run refused for --efficiency 0 still wrote its --json file"
echo "ok: advisor predict"
