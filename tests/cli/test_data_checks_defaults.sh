#!/usr/bin/env bash
# The data checks that jobs run by default (issue 28; docs/reliability.md, "Which checks a job runs"):
#  - jobscripts/train.sbatch, run outside Slurm with a stand-in srun that records its command and
#    runs it as one rank: by default it passes --require-checksums (and the run refuses a dataset
#    without manifest.json, naming `scaletrain-data manifest`); DATA_CHECKS=verify adds
#    --verify-data, DATA_CHECKS=none passes neither (and the same dataset trains); an option given
#    to the script is not given twice; a bad DATA_CHECKS is exit 2 naming the variable, before srun;
#  - scaletrain-study's dry run: every run's sbatch line exports DATA_CHECKS=require by default and
#    the data-checks parameter's value otherwise; the default refuses, before anything is
#    submitted, a dataset that --require-checksums would refuse; a bad value names the parameter.
source "$(dirname "$0")/lib.sh"
SOURCE=${ST_SOURCE:-$(cd "$(dirname "$0")/../.." && pwd)}
BIN=$(cd "$BIN" && pwd)
T=$TMP_ROOT/data_checks_defaults
rm -rf "$T" && mkdir -p "$T/fake-bin" "$T/no-slurm"

"$BIN/scaletrain-data" synthetic --samples 64 --val-samples 16 --image-size 8,8,1 --classes 4 --shards 2 \
  --output "$T/data" >/dev/null
cp -r "$T/data" "$T/nomanifest" && rm "$T/nomanifest"/*/manifest.json

cat > "$T/fake-bin/srun" <<EOF
#!/bin/bash
# srun's options (--x=y), recorded, then the command as one rank.
echo "\$*" > "$T/srun.args"
while [[ "\${1:-}" == --* ]]; do shift; done
exec "\$@"
EOF
chmod +x "$T/fake-bin/srun"

# job NAME DATA_CHECKS DATA [options...]: train.sbatch, one step; its output in $T/NAME.log, exit in $rc.
job() {
  local name=$1 checks=$2 data=$3
  shift 3
  rm -f "$T/srun.args"
  rc=0
  env PATH="$T/fake-bin:$PATH" ${checks:+DATA_CHECKS=$checks} DATA="$data" OUTPUT_DIR="$T/$name" \
    SCALETRAIN="$BIN/scaletrain" timeout 120 bash "$SOURCE/jobscripts/train.sbatch" --model resnet20 \
    --batch-size 8 --max-steps 1 --log-every 0 "$@" >"$T/$name.log" 2>&1 || rc=$?
}
args_have() { grep -q -- " $1\( \|$\)" "$T/srun.args" || fail "$2: srun's command lacks $1: $(cat "$T/srun.args")"; }
args_lack() { ! grep -q -- " $1\( \|$\)" "$T/srun.args" || fail "$2: srun's command has $1: $(cat "$T/srun.args")"; }

job default "" "$T/data"
[ "$rc" -eq 0 ] || fail "train.sbatch (default) failed ($rc): $(tail -n 20 "$T/default.log")"
args_have --require-checksums "default" && args_lack --verify-data "default"
grep -q "data checks require" "$T/default.log" || fail "the start line does not say the checks: $(head -n 3 "$T/default.log")"
echo "ok: train.sbatch passes --require-checksums by default, and a dataset of scaletrain-data passes it"

job refused "" "$T/nomanifest"
[ "$rc" -eq 2 ] || fail "train.sbatch (default) on a dataset without manifests: exit $rc, expected 2: $(tail "$T/refused.log")"
grep -qF "scaletrain-data manifest $T/nomanifest" "$T/refused.log" ||
  fail "the refusal does not name the way out: $(tail "$T/refused.log")"
echo "ok: by default a dataset without manifest.json is refused at start-up, naming scaletrain-data manifest"

job none none "$T/nomanifest"
[ "$rc" -eq 0 ] || fail "train.sbatch DATA_CHECKS=none failed ($rc): $(tail -n 20 "$T/none.log")"
args_lack --require-checksums "DATA_CHECKS=none" && args_lack --verify-data "DATA_CHECKS=none"
echo "ok: DATA_CHECKS=none passes neither option and trains on the same dataset"

job verify verify "$T/data"
[ "$rc" -eq 0 ] || fail "train.sbatch DATA_CHECKS=verify failed ($rc): $(tail -n 20 "$T/verify.log")"
args_have --require-checksums "DATA_CHECKS=verify" && args_have --verify-data "DATA_CHECKS=verify"
echo "ok: DATA_CHECKS=verify passes --require-checksums --verify-data"

job given "" "$T/data" --require-checksums
[ "$rc" -eq 0 ] || fail "train.sbatch with --require-checksums given failed ($rc): $(tail -n 20 "$T/given.log")"
[ "$(grep -o -- "--require-checksums" "$T/srun.args" | wc -l)" -eq 1 ] || fail "given twice: $(cat "$T/srun.args")"
echo "ok: --require-checksums given to the script is passed once"

job bad Verify "$T/data"
[ "$rc" -eq 2 ] || fail "DATA_CHECKS=Verify: exit $rc, expected 2: $(cat "$T/bad.log")"
grep -qF "DATA_CHECKS='Verify': use require (the default), verify or none" "$T/bad.log" || fail "bad value: $(cat "$T/bad.log")"
[ ! -e "$T/srun.args" ] || fail "DATA_CHECKS=Verify still ran srun"
echo "ok: a bad DATA_CHECKS is exit 2 naming the variable, before srun"

# The study: a dry run, with a stand-in sbatch that accepts every job (--test-only) in front of any
# Slurm configured on this machine.
printf '#!/bin/sh\nexit 0\n' > "$T/no-slurm/sbatch" && chmod +x "$T/no-slurm/sbatch"
cat > "$T/study.ini" <<EOF
[study]
output = $T/study
mode = weak
nodes = 1,2
ranks-per-node = 1
batch-per-rank = 8
steps = 2

[model resnet20]
data = data
EOF
study() { env PATH="$T/no-slurm:$PATH" SCALETRAIN="$BIN/scaletrain" /usr/bin/python3 "$SOURCE/src/study/scaletrain_study.py" submit "${STUDY_FILE:-$T/study.ini}" --dry-run "$@"; }
study > "$T/dry-default.sh" 2>&1 || fail "the study's dry run failed: $(cat "$T/dry-default.sh")"
[ "$(grep -c '^job[0-9]*=$(sbatch .*,DATA_CHECKS=require[, ]' "$T/dry-default.sh")" -eq 2 ] ||
  fail "not every run exports DATA_CHECKS=require: $(cat "$T/dry-default.sh")"
study --data-checks none > "$T/dry-none.sh" 2>&1 || fail "the dry run with --data-checks none failed: $(cat "$T/dry-none.sh")"
[ "$(grep -c '^job[0-9]*=$(sbatch .*,DATA_CHECKS=none[, ]' "$T/dry-none.sh")" -eq 2 ] ||
  fail "--data-checks none is not exported: $(cat "$T/dry-none.sh")"
echo "ok: a study's runs export DATA_CHECKS=require by default, and --data-checks none turns it off"

expect_exit2() {  # NAME PATTERN ARGS...: the dry run exits 2 naming PATTERN
  local name=$1 pattern=$2 out rc=0
  shift 2
  out=$(study "$@" 2>&1) || rc=$?
  [ "$rc" -eq 2 ] || fail "$name: exit $rc, expected 2: $out"
  grep -qF -- "$pattern" <<<"$out" || fail "$name: the message does not mention '$pattern': $out"
  echo "ok: $name (exit 2): $(grep -m1 -F -- "$pattern" <<<"$out" | cut -c1-200)"
}
expect_exit2 "a study's bad data-checks" "--data-checks = 'all': use require (the default), verify or none" \
  --data-checks all
sed 's/^steps = 2/&\ndata-checks = sometimes/' "$T/study.ini" > "$T/bad.ini"
STUDY_FILE=$T/bad.ini expect_exit2 "a study file's bad data-checks" "[study] data-checks = 'sometimes': use require"
expect_exit2 "data without manifests, data-checks require" "refused by data-checks = require" \
  --model resnet20 --data "$T/nomanifest"
expect_exit2 "data without manifests, data-checks verify" "scaletrain-data manifest $T/nomanifest" \
  --model resnet20 --data "$T/nomanifest" --data-checks verify
study --model resnet20 --data "$T/nomanifest" --data-checks none >/dev/null 2>&1 ||
  fail "data-checks none still checks the manifests"
expect_exit2 "--verify-data in train-options" "--verify-data is set per run by the study (data-checks)" \
  --train-options=--verify-data
echo "PASS"
