#!/usr/bin/env bash
# scaletrain-advisor predict (issue 14): its output for the shipped DGX-1 machine file and ResNet-50
# calibrations, checked by tests/advisor/check_advice.py against values recomputed from the
# formulas of docs/scaling-model.md (written from the doc alone, not from src/advisor/), and
# against points worked by hand for the fixture calibration
# tests/advisor/resnet50-v100-mixed-handcheck.json; every calibration shipped in
# share/advisor/calibrations/, with the figures the doc's validation table quotes for them; a
# strong series that does not start at 1 GPU, forced algorithms, a host-staged machine; and the
# user errors (non-zero exit, a message naming the option, file or value).
source "$(dirname "$0")/lib.sh"
SRC=${ST_SOURCE:-.}
T=$TMP_ROOT/advisor_predict
rm -rf "$T" && mkdir -p "$T"
A=$BIN/scaletrain-advisor
CHECK=("$PY" "$SRC/tests/advisor/check_advice.py")
DGX1=$SRC/share/advisor/machines/dgx1-4xedr.json
FIXTURE=$SRC/tests/advisor/resnet50-v100-mixed-handcheck.json
SHIPPED=$SRC/share/advisor/calibrations

echo "== help"
out=$("$A" --help)
grep -qF "docs/scaling-model.md" <<<"$out" || fail "scaletrain-advisor --help does not point to docs/scaling-model.md: $out"
grep -qF "predict" <<<"$out" || fail "scaletrain-advisor --help does not list predict: $out"
out=$("$A" predict --help)
for opt in --calibration --machine --comm-bench --gpus --batch --scaling --efficiency --budget-nodes --algorithm --json; do
  grep -qF -- "$opt" <<<"$out" || fail "predict --help does not mention $opt"
done

# predict NAME MACHINE CALIBRATION OPTION...: starts predict --json in the background (each run
# takes ~0.4 s to start, mostly waiting); check_all then runs check_advice.py on each JSON with the
# same machine, calibration and options (check_advice.py takes the advisor's own options).
# Each background run is an MPI singleton with its own session directory: singletons started
# together race to create a shared one (Open MPI: "mkdir ... /tmp/ompi.HOST.0: File exists").
# Short paths under /tmp: the session directory holds Unix sockets, whose paths are limited.
SESSIONS=$(mktemp -d /tmp/st-advisor.XXXXXX)
trap 'rm -rf "$SESSIONS"' EXIT
runs=()
declare -A hand_worked=([fixture]="--hand-worked fixture" [shipped-resnet50-v100-mixed-mlperf-v0.6]="--hand-worked mlperf-v0.6")
predict() {
  local name=$1
  runs+=("$name")
  printf '%s\n' "${@:2}" >"$T/$name.args"
  local session=$SESSIONS/p${#runs[@]}
  mkdir -p "$session"
  (export OMPI_MCA_orte_tmpdir_base="$session"
   rc=0; "$A" predict --calibration "$3" --machine "$2" --json "$T/$name.json" "${@:4}" >"$T/$name.txt" 2>&1 || rc=$?
   echo "$rc" >"$T/$name.rc") &
}
check_all() {
  local name args
  wait
  for name in "${runs[@]}"; do
    mapfile -t args <"$T/$name.args"
    [ "$(cat "$T/$name.rc")" = 0 ] || fail "$name: predict exited $(cat "$T/$name.rc"): $(cat "$T/$name.txt")"
    grep -qF "largest count at >=" "$T/$name.txt" || fail "$name: no largest-count line in the table: $(cat "$T/$name.txt")"
    "${CHECK[@]}" --machine "${args[0]}" --calibration "${args[1]}" --advice "$T/$name.json" "${args[@]:2}" \
      ${hand_worked[$name]:-} || fail "$name: the advisor's JSON disagrees with docs/scaling-model.md (above)"
  done
  runs=()
}

# A machine whose hierarchical all-reduce stages through the host (host_copy_GBps > 0).
"$PY" - "$DGX1" "$T/host-staged.json" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
m["host_copy_GBps"] = 12
m["name"] = "DGX-1 with host-staged MPI across nodes (test)"
json.dump(m, open(sys.argv[2], "w"))
EOF

echo "== the DGX-1 file and the fixture calibration: both series, a 2-node budget, the hand-worked points"
predict fixture "$DGX1" "$FIXTURE" --budget-nodes 2
# A strong series from 2 GPUs (global batch 64) that ends at 24 GPUs (80 would get 0.8 samples),
# at another threshold.
predict strong2 "$DGX1" "$FIXTURE" --scaling strong --gpus 2,8,24,80 --batch 32 --efficiency 0.45
# Forced algorithms; 3 ranks on a node (not a power of two); a 4-node budget; host staging.
predict ring "$DGX1" "$FIXTURE" --algorithm ring --scaling weak --gpus 1,2,8,16,64,640
predict hier "$T/host-staged.json" "$FIXTURE" --algorithm hierarchical --gpus 1,3,8,16,32,640 --budget-nodes 4 --batch 64
predict hostauto "$T/host-staged.json" "$FIXTURE" --gpus 1,8,16,128 --batch 96
# Jobs sharing 2 nodes at a global batch of 24: 16-GPU jobs would get 1.5 samples, 1 GPU 24.
predict jobbatch "$DGX1" "$FIXTURE" --scaling weak --gpus 1,8 --budget-nodes 2 --job-batch 24
check_all
grep -qF "sharing 16 GPUs (2 nodes)" "$T/fixture.txt" || fail "no sharing table for 2 nodes: $(cat "$T/fixture.txt")"
grep -qF "each with a global batch of 24:" "$T/jobbatch.txt" || fail "no --job-batch in the sharing: $(cat "$T/jobbatch.txt")"
grep -qF "ends at 24 GPUs" "$T/strong2.txt" || fail "strong series from 2 GPUs at 32 does not end at 24: $(cat "$T/strong2.txt")"

echo "== the DGX-1 file and the shipped calibrations"
shipped=("$SHIPPED"/*.json)
[ -e "${shipped[0]}" ] || fail "no calibration in $SHIPPED"
grep -lq '"model": "resnet50"' "${shipped[@]}" || fail "no ResNet-50 calibration in $SHIPPED"
for cal in "${shipped[@]}"; do
  predict "shipped-$(basename "$cal" .json)" "$DGX1" "$cal" --budget-nodes 2
done
# The points of the doc's validation table ("Validation against published DGX-1 results").
v06=$SHIPPED/resnet50-v100-mixed-mlperf-v0.6.json v05=$SHIPPED/resnet50-v100-mixed-mlperf-v0.5.json
ncf=$SHIPPED/ncf-v100-mixed-dle.json
if [ -f "$v06" ]; then predict doc-v06-n130 "$DGX1" "$v06" --scaling weak --batch 52 --gpus 8,1040; fi
if [ -f "$v05" ]; then predict doc-v05-n80 "$DGX1" "$v05" --scaling weak --batch 26 --gpus 8,640; fi
if [ -f "$ncf" ]; then predict doc-ncf "$DGX1" "$ncf" --scaling strong --batch 1048576 --gpus 1,8; fi
check_all
# The doc's table as it rounds: a predicted step (ms) at a weak point, or a throughput and a speedup.
"$PY" - "$T" <<'EOF'
import json, os, sys
t = sys.argv[1]
claims = [  # (run, series, GPUs, term, scale, the doc's figure, its decimals)
    ("shipped-resnet50-v100-mixed-mlperf-v0.6", "weak", 8, "step_s", 1e3, 148.8, 1),
    ("doc-v06-n130", "weak", 1040, "step_s", 1e3, 42.49, 2),
    ("shipped-resnet50-v100-mixed-mlperf-v0.5", "weak", 8, "step_s", 1e3, 164.7, 1),
    ("doc-v05-n80", "weak", 640, "step_s", 1e3, 26.62, 2),
    ("doc-ncf", "strong", 8, "samples_per_s", 1e-6, 125.1, 1),
    ("doc-ncf", "strong", 8, "speedup", 1, 5.727, 3),
]
for run, kind, gpus, term, scale, figure, decimals in claims:
    path = os.path.join(t, run + ".json")
    if not os.path.exists(path):
        continue
    point = next(p for p in json.load(open(path))["series"][kind] if p["gpus"] == gpus)
    got = round(point[term] * scale, decimals)
    assert got == figure, (f"docs/scaling-model.md's validation table says {figure} for {run} {kind} {gpus} GPUs "
                           f"{term}; the advisor gives {point[term] * scale}")
    print(f"ok: the doc's {figure} ({run}, {gpus} GPUs, {term})")
EOF

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
  mkdir -p "$SESSIONS/e$id"  # its own MPI session directory, as predict() above
  (export OMPI_MCA_orte_tmpdir_base="$SESSIONS/e$id"
   rc=0; timeout 60 "$@" >"$T/err$id.out" 2>&1 || rc=$?; echo "$rc" >"$T/err$id.rc") &
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
refuse "--job-batch 0.5 on 8-GPU nodes" "global batch of 0.5" -- "${P[@]}" --calibration "$FIXTURE" --job-batch 0.5
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
