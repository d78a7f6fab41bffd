#!/usr/bin/env bash
# scaletrain-study under a real Slurm (tests/slurm/fixture.sh: two emulated nodes, one rank each):
# a study of resnet20 on a small synthetic dataset, strong and weak series at 1 and 2 nodes,
# 2 repeats, 40 steps per run, chained. It checks:
#  - the dry run prints every sbatch line (a valid shell script) and submits nothing;
#  - a dry run of runs inside one node (gpus = 1,2) and three [series] of one model: each run's
#    sbatch line (--nodes, --ntasks-per-node, and --gpus-per-node with request-gpus), directory
#    and train options;
#  - a dry run of the shipped inputs/study_cnn_dgx1.ini (on a synthetic dataset): its 333 runs
#    and report job, and a few runs' sbatch lines, configs and train options;
#  - a dry run of the shipped inputs/study_transformer_dgx1.ini (on synthetic translation data):
#    its 60 runs, each with --batch-tokens (81,920 tokens split over a strong run's ranks, 10,240
#    per rank in a weak one), and the refusals of a batch in the wrong unit (samples for the
#    Transformer, tokens for ResNet-20) and of a token budget the ranks do not divide;
#  - bad input is refused before anything is submitted, with exit 2 and a message naming the
#    option or key: a strong global batch that 3 ranks do not divide (naming the valid node counts
#    near 3), an unknown mode, a bad node list, a missing dataset, two series of one name, more GPUs
#    than ranks per node, a misspelt series model; and exit 1 without sbatch;
#  - the real submission: study.json against the values this test expects (accumulation steps 2
#    for the 1-node strong run, the linear learning-rate rule, the chain of dependencies, the same
#    sbatch lines as the dry run), and each run's report.json against study.json;
#  - two runs fail on purpose: one is cancelled while it waits in the chain, one loses its only
#    rank to SIGKILL while it trains (a node crash). `status` lists them as failed, the report as
#    missing; `resubmit --failed` reruns those two alone: the cancelled one from scratch, the
#    killed one from its last checkpoint; then `status` shows every run done;
#  - the report (scaletrain-report): scaling.csv and scaling.json against the numbers this test
#    computes from each run's report.json, and the plots are valid PNG and SVG files;
#  - a series on 1 and 2 ranks of one node, submitted: study.json's series, status, and the
#    report's points g1 and g2.
# Skips with a message where the fixture cannot start (not root, no Slurm packages).
source "$(dirname "$0")/lib.sh"
SOURCE=${ST_SOURCE:-$(cd "$(dirname "$0")/../.." && pwd)}
BIN=$(cd "${ST_BIN:-$SOURCE/build/bin}" && pwd)
T=${ST_TMP:-/tmp/scaletrain-test}/slurm_study
PY=/usr/bin/python3
STUDY_TOOL=("$SOURCE/jobscripts/study.sh")
export SCALETRAIN=$BIN/scaletrain
rm -rf "$T" && mkdir -p "$T"

slurm_fixture_up

# 32x32 images: about 0.15 s per step of resnet20 on one core, so that a run trains for a few
# seconds (long enough to be killed while it trains) and the study takes about two minutes.
"$BIN/scaletrain-data" synthetic --samples 1024 --val-samples 64 --image-size 32,32,3 --classes 4 --shards 2 \
  --output "$T/data" >/dev/null
# Strong: global batch 32 with at most 16 per rank: 1 node accumulates 2 micro-batches of 16,
# 2 nodes take 16 each. Weak: 16 per rank. LR: 0.1 per 32 samples, scaled linearly.
cat > "$T/study.ini" <<EOF
# The Slurm test's study (tests/slurm/test_slurm_study.sh).
[study]
name = fixture
output = $T/study
mode = both
nodes = 1,2
ranks-per-node = 1
global-batch = 32
batch-per-rank = 16
max-batch-per-rank = 16
lr-scaling = linear
base-lr = 0.1
reference-batch = 32
warmup-epochs = 0.25
steps = 40
repeats = 2
seed = 7
chain = yes
time = 00:10:00             # above train.sbatch's 300 s checkpoint warning
sbatch-options = --cpus-per-task=1
train-options = --log-every 2 --checkpoint-every-steps 4

[model resnet20]
data = data                 # relative to this file
EOF

# expect_exit NAME CODE PATTERN CMD...: CMD exits with CODE and its output contains PATTERN.
expect_exit() {
  local name=$1 code=$2 pattern=$3 out rc=0
  shift 3
  out=$(timeout 60 "$@" 2>&1) || rc=$?
  [ "$rc" -eq "$code" ] || fail "$name: exit $rc, expected $code: $out"
  grep -qF -- "$pattern" <<<"$out" || fail "$name: the message does not mention '$pattern': $out"
  echo "ok: $name (exit $rc): $(grep -m1 -F -- "$pattern" <<<"$out" | cut -c1-160)"
}
queue_empty() { [ -z "$(squeue -h -o %i)" ] || fail "$1: jobs were submitted: $(squeue -h)"; }

echo "== dry run"
"${STUDY_TOOL[@]}" submit "$T/study.ini" --dry-run --no-chain > "$T/dry-run.sh" || fail "the dry run failed"
queue_empty "dry run"
[ ! -e "$T/study" ] || fail "the dry run created $T/study"
bash -n "$T/dry-run.sh" || fail "the dry run is not a valid shell script: $(cat "$T/dry-run.sh")"
[ "$(grep -c '^job[0-9]*=$(sbatch --parsable ' "$T/dry-run.sh")" -eq 8 ] || fail "not 8 run lines: $(cat "$T/dry-run.sh")"
grep -q '^report=$(sbatch --parsable --dependency=afterany:$job1:$job2:$job3:$job4:$job5:$job6:$job7:$job8 ' \
  "$T/dry-run.sh" || fail "no report line depending on the 8 runs: $(tail -n 2 "$T/dry-run.sh")"
! grep '^job' "$T/dry-run.sh" | grep -q -- --dependency || fail "--no-chain still chains: $(cat "$T/dry-run.sh")"
echo "ok: dry run: 8 run lines and the report line, a valid shell script, nothing submitted or created"

# NCF in a study: scaletrain's models come from 'scaletrain info --json', and a recommendation
# dataset's epoch is its positives and their 4 sampled negatives (2000 x 19 x 5 = 190,000: 371
# steps of 512 in an epoch, so 10 steps are a run of --epochs 1 --max-steps 10).
"$BIN/scaletrain-data" synthetic --task recommendation --users 2000 --items 2000 --groups 50 --positives-per-user 20 \
  --eval-negatives 99 --output "$T/ncf-data" >/dev/null
"${STUDY_TOOL[@]}" submit "$T/study.ini" --model ncf --data "$T/ncf-data" --mode weak --global-batch 512 \
  --batch-per-rank 256 --max-batch-per-rank 256 --base-lr 0.0045 --steps 10 --dry-run --no-chain > "$T/dry-run-ncf.sh" ||
  fail "the NCF dry run failed"
[ "$(grep -c '^job[0-9]*=$(sbatch --parsable .*MODEL=ncf' "$T/dry-run-ncf.sh")" -eq 4 ] ||
  fail "not 4 NCF run lines (weak, 1 and 2 nodes, 2 repeats): $(cat "$T/dry-run-ncf.sh")"
grep -q -- "--epochs 1 --max-steps 10" "$T/dry-run-ncf.sh" || fail "NCF epochs: $(cat "$T/dry-run-ncf.sh")"
queue_empty "NCF dry run"
echo "ok: an NCF study's dry run"

# Series inside one node and several series of one model (docs/scaling-studies.md): gpus = 1,2 are
# runs on 1 and 2 "GPUs" (ranks) of one node, then 2 whole nodes of 2 ranks; two strong series of
# resnet20 at global batches 32 and 64 ([series NAME] sections inheriting [model resnet20]), and a
# weak series with its own nodes, no gpus and 1 rank per node. The fixture's nodes have 2 CPUs,
# so sbatch --test-only checks every shape, 2 ranks on one node included.
cat > "$T/series.ini" <<EOF
[study]
name = series
output = $T/series-study
mode = strong
gpus = 1,2                  # runs inside one node: 1 and 2 ranks
nodes = 2                   # then whole nodes of ranks-per-node ranks
ranks-per-node = 2
global-batch = 32
max-batch-per-rank = 16
lr-scaling = linear
base-lr = 0.1
reference-batch = 32
steps = 4
time = 00:10:00
sbatch-options = --cpus-per-task=1

[model resnet20]
data = data

[series r20-b32]
model = resnet20

[series r20-b64]
model = resnet20
global-batch = 64

[series r20-weak]
model = resnet20
mode = weak
batch-per-rank = 8
gpus = none
nodes = 1,2
ranks-per-node = 1
EOF
"${STUDY_TOOL[@]}" submit "$T/series.ini" --dry-run > "$T/dry-run-series.sh" || fail "the series dry run failed"
bash -n "$T/dry-run-series.sh" || fail "the series dry run is not a valid shell script"
[ "$(grep -c '^job[0-9]*=$(sbatch --parsable .*MODEL=resnet20,' "$T/dry-run-series.sh")" -eq 8 ] ||
  fail "not 8 run lines (3 + 3 strong, 2 weak): $(cat "$T/dry-run-series.sh")"
# expect_run ID SBATCH TRAIN: the run's line has these sbatch options, its directory, these train options.
expect_run() {
  local line
  line=$(grep -F -- "--job-name=series-${1/\//-} " "$T/dry-run-series.sh") || fail "no line for run $1"
  grep -qF -- "--job-name=series-${1/\//-} $2 --time=" <<<"$line" || fail "$1: not '$2': $line"
  grep -qF -- "OUTPUT_DIR=$T/series-study/$1," <<<"$line" || fail "$1: not in $T/series-study/$1: $line"
  grep -qF -- "train.sbatch $3 " <<<"$line" || fail "$1: not '$3': $line"
  ! grep -q -- "--gpus-per-node\|--gres" <<<"$line" || fail "$1: asks for GPUs without request-gpus: $line"
  grep -q "^# $1: " "$T/dry-run-series.sh" || fail "no comment line for $1"
}
expect_run r20-b32/strong-g1-r1 "--nodes=1 --ntasks-per-node=1" "--batch-size 16 --accumulate-steps 2 --base-lr 0.1"
expect_run r20-b32/strong-g2-r1 "--nodes=1 --ntasks-per-node=2" "--batch-size 16 --base-lr 0.1"
expect_run r20-b32/strong-n2-r1 "--nodes=2 --ntasks-per-node=2" "--batch-size 8 --base-lr 0.1"
expect_run r20-b64/strong-g1-r1 "--nodes=1 --ntasks-per-node=1" "--batch-size 16 --accumulate-steps 4 --base-lr 0.2"
expect_run r20-b64/strong-g2-r1 "--nodes=1 --ntasks-per-node=2" "--batch-size 16 --accumulate-steps 2 --base-lr 0.2"
expect_run r20-b64/strong-n2-r1 "--nodes=2 --ntasks-per-node=2" "--batch-size 16 --base-lr 0.2"
expect_run r20-weak/weak-n1-r1 "--nodes=1 --ntasks-per-node=1" "--batch-size 8 --base-lr 0.025"
expect_run r20-weak/weak-n2-r1 "--nodes=2 --ntasks-per-node=1" "--batch-size 8 --base-lr 0.05"
# request-gpus: each run asks for one GPU per rank on its nodes. The fixture has no GPUs, so this
# dry run goes without sbatch on PATH, which leaves Slurm's check out (and keeps what the trainer's
# MPI start-up needs: /usr/bin without sbatch).
mkdir -p "$T/no-sbatch" && ln -s /usr/bin/* "$T/no-sbatch/" && rm -f "$T/no-sbatch/sbatch"
env PATH="$T/no-sbatch" /usr/bin/python3 "$SOURCE/src/study/scaletrain_study.py" submit "$T/series.ini" \
  --request-gpus gpus-per-node --dry-run > "$T/dry-run-gpus.sh" || fail "the request-gpus dry run failed"
grep -q "sbatch not found: not checked with Slurm" "$T/dry-run-gpus.sh" || fail "sbatch still found: $(head -1 "$T/dry-run-gpus.sh")"
for expected in "strong-g2-r1 --nodes=1 --ntasks-per-node=2 --gpus-per-node=2 " \
                "strong-n2-r1 --nodes=2 --ntasks-per-node=2 --gpus-per-node=2 " \
                "weak-n2-r1 --nodes=2 --ntasks-per-node=1 --gpus-per-node=1 "; do
  grep -qF -- "$expected" "$T/dry-run-gpus.sh" || fail "request-gpus: no '$expected': $(cat "$T/dry-run-gpus.sh")"
done
# The shipped study, inputs/study_cnn_dgx1.ini (issue 24), dry-run as its users would, with its data
# pointed at a synthetic set as large as its largest global batch (AlexNet weak on 80 nodes: 640
# ranks x 256 = 163,840 samples, one step per epoch) and its output here. Without sbatch on PATH
# (the fixture has no GPUs for its --gpus-per-node): the study tool checks the rest, the models
# against `scaletrain info`, the configs in inputs/ and the dataset.
"$BIN/scaletrain-data" synthetic --samples 163840 --val-samples 8 --image-size 2,2,1 --classes 4 --shards 1 \
  --output "$T/cnn-data" >/dev/null
sed "s#^data = .*#data = $T/cnn-data#" "$SOURCE/inputs/study_cnn_dgx1.ini" > "$T/study_cnn_dgx1.ini"
env PATH="$T/no-sbatch" /usr/bin/python3 "$SOURCE/src/study/scaletrain_study.py" submit "$T/study_cnn_dgx1.ini" \
  --output "$T/cnn-study" --dry-run > "$T/dry-run-cnn.sh" || fail "the dry run of inputs/study_cnn_dgx1.ini failed"
bash -n "$T/dry-run-cnn.sh" || fail "the cnn dry run is not a valid shell script"
# 12 series (4 networks x 2 strong + weak) on 4 GPU counts of one node plus their node counts: 111
# points, 3 repeats.
[ "$(grep -c '^job[0-9]*=$(sbatch --parsable ' "$T/dry-run-cnn.sh")" -eq 333 ] ||
  fail "inputs/study_cnn_dgx1.ini: not 333 run lines: $(grep -c '^job' "$T/dry-run-cnn.sh")"
grep -q '^report=$(sbatch --parsable --dependency=afterany:$job1:.*:$job333 ' "$T/dry-run-cnn.sh" ||
  fail "inputs/study_cnn_dgx1.ini: no report line after the 333 runs"
# expect_cnn_run ID SBATCH CONFIG TRAIN: the run's line asks Slurm for SBATCH (GPUs included), trains
# with inputs/CONFIG and these train options.
expect_cnn_run() {
  local line
  line=$(grep -F -- "--job-name=cnn-dgx1-${1/\//-} " "$T/dry-run-cnn.sh") || fail "cnn: no line for run $1"
  grep -qF -- "--job-name=cnn-dgx1-${1/\//-} $2 --time=00:45:00 " <<<"$line" || fail "cnn $1: not '$2': $line"
  grep -qF -- "OUTPUT_DIR=$T/cnn-study/$1," <<<"$line" || fail "cnn $1: not in $T/cnn-study/$1: $line"
  grep -qF -- ",CONFIG=$SOURCE/inputs/$3 " <<<"$line" || fail "cnn $1: not config inputs/$3: $line"
  grep -qF -- "train.sbatch $4 --stage-to /raid/scaletrain-stage" <<<"$line" || fail "cnn $1: not '$4': $line"
}
one="--nodes=1 --ntasks-per-node=1 --gpus-per-node=1"
expect_cnn_run alexnet-b256/strong-g1-r1 "$one" alexnet_imagenet.ini \
  "--batch-size 256 --base-lr 0.01 --warmup-epochs 5 --epochs 1 --max-steps 200 --seed 1"
expect_cnn_run alexnet-weak/weak-n80-r3 "--nodes=80 --ntasks-per-node=8 --gpus-per-node=8" alexnet_imagenet.ini \
  "--batch-size 256 --base-lr 6.4 --warmup-epochs 5 --epochs 200 --max-steps 200 --seed 3"
expect_cnn_run googlenet-b32/strong-n4-r2 "--nodes=4 --ntasks-per-node=8 --gpus-per-node=8" googlenet_imagenet.ini \
  "--batch-size 1 --base-lr 0.01 --warmup-epochs 5 --epochs 1 --max-steps 200 --seed 2"
expect_cnn_run inception_v3-b256/strong-g1-r1 "$one" inception_v3_imagenet.ini \
  "--batch-size 128 --accumulate-steps 2 --base-lr 0.0072 --warmup-epochs 5 --epochs 1 --max-steps 200 --seed 1"
expect_cnn_run resnet50-b64/strong-g4-r1 "--nodes=1 --ntasks-per-node=4 --gpus-per-node=4" resnet50_imagenet.ini \
  "--batch-size 16 --base-lr 0.025 --warmup-epochs 5 --epochs 1 --max-steps 200 --seed 1"
[ ! -e "$T/cnn-study" ] || fail "the cnn dry run created $T/cnn-study"
echo "ok: inputs/study_cnn_dgx1.ini: 333 sbatch lines and the report's, runs as expected"
# The shipped inputs/study_transformer_dgx1.ini: a translation model, whose batches count tokens
# (--batch-tokens per rank). Its data: synthetic pairs of up to 240 tokens (below the 320 a rank of
# its strong series gets on 32 nodes), with as many target tokens as its largest global batch (the
# weak series on 80 nodes: 640 ranks x 10,240 = 6,553,600), so that no run is refused for its size.
"$BIN/scaletrain-data" synthetic --task translation --kind copy --sentences 54000 --val-sentences 8 --words 20 \
  --min-length 2 --max-length 240 --output "$T/wmt-data" >/dev/null
sed "s#^data = .*#data = $T/wmt-data#" "$SOURCE/inputs/study_transformer_dgx1.ini" > "$T/study_transformer_dgx1.ini"
transformer_study=(env PATH="$T/no-sbatch" /usr/bin/python3 "$SOURCE/src/study/scaletrain_study.py" submit
  "$T/study_transformer_dgx1.ini" --output "$T/transformer-study" --dry-run)
"${transformer_study[@]}" > "$T/dry-run-transformer.sh" || fail "the dry run of inputs/study_transformer_dgx1.ini failed"
bash -n "$T/dry-run-transformer.sh" || fail "the transformer dry run is not a valid shell script"
"$BIN/scaletrain-data" inspect "$T/wmt-data" --json > "$T/wmt-data.json"
$PY - "$T" "$SOURCE" <<'PY' || fail "inputs/study_transformer_dgx1.ini: the dry run's runs"
import json, math, re, shlex, sys
T, SOURCE = sys.argv[1:]
lines = open(f"{T}/dry-run-transformer.sh").read().splitlines()
tokens = json.load(open(f"{T}/wmt-data.json"))["splits"]["train"]["target_tokens"]
# Independent expectation: strong at 81,920 tokens on 1, 2, 4, 8 GPUs and 2 to 32 nodes of 8; weak
# at 10,240 per GPU on 1, 2, 4, 8 GPUs and 2 to 80 nodes; 3 repeats; 100 steps.
points = {"strong": [(1, g) for g in (1, 2, 4, 8)] + [(n, 8) for n in (2, 4, 8, 16, 32)],
          "weak": [(1, g) for g in (1, 2, 4, 8)] + [(n, 8) for n in (2, 4, 8, 16, 32, 64, 80)]}
expected = []
for repeat in (1, 2, 3):
    for mode in ("strong", "weak"):
        for nodes, rpn in points[mode]:
            ranks = nodes * rpn
            per_rank = 81920 // ranks if mode == "strong" else 10240
            point = f"g{rpn}" if nodes == 1 else f"n{nodes}"
            epochs = math.ceil(100 / (tokens // (per_rank * ranks)))
            expected.append((f"transformer-{mode}/{mode}-{point}-r{repeat}", nodes, rpn, per_rank, epochs, repeat))
runs = [l for l in lines if l.startswith("job")]
comments = [l for l in lines if l.startswith("# transformer-")]
assert len(runs) == len(comments) == len(expected) == 60, (len(runs), len(comments))
assert re.match(r"^report=\$\(sbatch --parsable --dependency=afterany:\$job1:.*:\$job60 ", lines[-1]), lines[-1]
for line, comment, (rid, nodes, rpn, per_rank, epochs, repeat) in zip(runs, comments, expected):
    argv = shlex.split(re.match(r"^job\d+=\$\((.*)\)$", line).group(1))
    train = argv[argv.index(f"{SOURCE}/jobscripts/train.sbatch") + 1:]
    assert f"--job-name=transformer-dgx1-{rid.replace('/', '-')}" in argv, (rid, argv)
    for option in (f"--nodes={nodes}", f"--ntasks-per-node={rpn}", f"--gpus-per-node={rpn}", "--time=02:00:00"):
        assert option in argv, (rid, option, argv)
    export = next(a for a in argv if a.startswith("--export="))
    assert f",MODEL=transformer," in export and export.endswith(f",CONFIG={SOURCE}/inputs/transformer_nvidia_dgx1.ini") \
        and f",OUTPUT_DIR={T}/transformer-study/{rid}," in export, (rid, export)
    # The per-rank split of the token budget, no accumulation, the recipe's learning rate.
    assert train == ["--batch-tokens", str(per_rank), "--base-lr", "0.0019", "--epochs", str(epochs), "--max-steps",
                     "100", "--seed", str(repeat), "--stage-to", "/raid/scaletrain-stage"], (rid, train)
    ranks = nodes * rpn
    assert comment == f"# {rid}: global batch {per_rank * ranks} tokens = {ranks} rank{'s' if ranks > 1 else ''} x " \
                      f"{per_rank} tokens, lr 0.0019", (rid, comment)
print(f"ok: inputs/study_transformer_dgx1.ini: 60 runs and the report job; strong --batch-tokens 81920 / ranks "
      f"(81920 on 1 GPU to 320 on 32 nodes), weak 10240 per rank")
PY
[ ! -e "$T/transformer-study" ] || fail "the transformer dry run created $T/transformer-study"
# A batch in the wrong unit is refused, naming the key and the model; so is a token budget the
# ranks do not divide.
expect_exit "a batch in samples for a translation model" 2 \
  "--global-batch = 81920: a batch in samples, and series transformer-strong (model transformer), series transformer-weak (model transformer) train translation (the task of their dataset $T/wmt-data), whose batches count tokens: use --global-batch-tokens instead" \
  "${transformer_study[@]}" --global-batch 81920
expect_exit "a batch in tokens for an image model" 2 \
  "--batch-tokens-per-rank = 256: a batch in tokens, for a translation model, and series r20-b32 (model resnet20)" \
  env PATH="$T/no-sbatch" /usr/bin/python3 "$SOURCE/src/study/scaletrain_study.py" submit "$T/series.ini" \
  --batch-tokens-per-rank 256 --dry-run
rc=0
out=$("${transformer_study[@]}" --gpus 1,2,3,4 2>&1) || rc=$?
[ "$rc" -eq 2 ] && grep -qF "global batch 81920 tokens (study file $T/study_transformer_dgx1.ini [series transformer-strong] global-batch-tokens) does not divide" <<<"$out" &&
  grep -qF "3 GPUs of one node = 3 ranks: 81920 / 3 is not an integer; valid GPU counts near 3: 2, 4" <<<"$out" ||
  fail "81,920 tokens on 3 GPUs: exit $rc: $out"
echo "ok: 81,920 tokens on 3 GPUs refused (exit 2), naming the valid GPU counts near 3"
[ ! -e "$T/transformer-study" ] || fail "a refused transformer dry run created $T/transformer-study"
queue_empty "series dry runs"
[ ! -e "$T/series-study" ] || fail "the series dry run created $T/series-study"
echo "ok: a study with runs inside one node and three series of one model: 8 sbatch lines as expected"

echo "== bad input is refused before anything is submitted"
printf '[series r20-b64]\nmodel = resnet20\n' | cat "$T/series.ini" - > "$T/dup-series.ini"
expect_exit "two series of one name" 2 "dup-series.ini line 34: [series r20-b64] appears twice" \
  "${STUDY_TOOL[@]}" submit "$T/dup-series.ini" --dry-run
expect_exit "more GPUs than ranks per node" 2 \
  "--gpus = 1,4: series r20-b32 (model resnet20) runs inside one node on at most ranks-per-node = 2 GPUs" \
  "${STUDY_TOOL[@]}" submit "$T/series.ini" --gpus 1,4 --dry-run
sed 's/^model = resnet20$/model = resnet02/' "$T/series.ini" > "$T/bad-series-model.ini"
expect_exit "a misspelt series model" 2 "[model resnet20] is used by no series ([series r20-b32] model = 'resnet02'" \
  "${STUDY_TOOL[@]}" submit "$T/bad-series-model.ini" --dry-run
expect_exit "strong global batch 32 on 3 ranks" 2 "valid node counts near 3: 2, 4" \
  "${STUDY_TOOL[@]}" submit "$T/study.ini" --nodes 1,2,3 --output "$T/bad"
expect_exit "unknown mode" 2 "--mode = 'sideways': the mode is strong, weak or both" \
  "${STUDY_TOOL[@]}" submit "$T/study.ini" --mode sideways --output "$T/bad"
sed 's/^nodes = .*/nodes = 1,two/' "$T/study.ini" > "$T/bad-nodes.ini"
expect_exit "bad node list" 2 "bad-nodes.ini [study] nodes = '1,two': 'two' is not a node count" \
  "${STUDY_TOOL[@]}" submit "$T/bad-nodes.ini" --output "$T/bad"
expect_exit "missing dataset" 2 "--data = '$T/nodata': no such directory" \
  "${STUDY_TOOL[@]}" submit "$T/study.ini" --model resnet20 --data "$T/nodata" --output "$T/bad"
expect_exit "no sbatch" 1 "sbatch not found on PATH" \
  env PATH=/nonexistent /usr/bin/python3 "$SOURCE/src/study/scaletrain_study.py" submit "$T/study.ini" --output "$T/bad"
queue_empty "refusals"
[ ! -e "$T/bad" ] || fail "a refused study created $T/bad"

echo "== the study, with one run cancelled while it waits and one killed while it trains"
"${STUDY_TOOL[@]}" submit "$T/study.ini" > "$T/submit.out" || fail "submit failed: $(cat "$T/submit.out")"
cat "$T/submit.out"
job_of() { $PY -c 'import json,sys; m=json.load(open(sys.argv[1])); print(next(r["job_id"] for r in m["runs"] if r["id"] == sys.argv[2]))' "$T/study/study.json" "$1"; }
cancelled_run=resnet20/strong-n2-r1 killed_run=resnet20/strong-n1-r2
cancelled=$(job_of $cancelled_run) killed=$(job_of $killed_run)
[ "$(job_field "$cancelled" JobState)" = PENDING ] || fail "$cancelled_run is not waiting in the chain: $(job_summary "$cancelled")"
scancel "$cancelled"
wait_job_state "$cancelled" CANCELLED 30 || fail "$cancelled_run was not cancelled"
# The killed run checkpoints every 4 steps; SIGKILL after step 6 leaves the checkpoint of step 4.
log=$T/study/logs/fixture-resnet20-strong-n1-r2-$killed.out
wait_job_state "$killed" RUNNING 300 || fail "$killed_run did not start"
for i in $(seq 600); do grep -q "step 6/" "$log" 2>/dev/null && break; sleep 0.1; done
grep -q "step 6/" "$log" || fail "$killed_run shows no step 6: $(tail -n 5 "$log")"
# The rank is the scaletrain process of that job writing into that run directory (job ids of
# another Slurm on the machine may be the same).
victim=
for p in $(pgrep -x scaletrain || true); do
  tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | grep -qx "SLURM_JOB_ID=$killed" &&
    tr '\0' '\n' 2>/dev/null <"/proc/$p/cmdline" | grep -qx "$T/study/$killed_run" && victim=$p
done
[ -n "$victim" ] || fail "no scaletrain process of job $killed (did it finish already? $(tail -n 3 "$log"))"
kill -9 "$victim"
wait_job "$killed" 60 || fail "job $killed did not end after its rank was killed"
[ "$(job_field "$killed" JobState)" = FAILED ] || fail "killed run: $(job_summary "$killed")"
report_job=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["report_job_id"])' "$T/study/study.json")
wait_job "$report_job" 400 || fail "the report job did not finish: $(tail -n 20 "$T"/study/logs/fixture-report-*.out)"

echo "== study.json and each run's report.json"
$PY - "$T" "$T/dry-run.sh" <<'PY'
import json, math, os, re, shlex, sys
T, dry_run = sys.argv[1], sys.argv[2]
m = json.load(open(f"{T}/study/study.json"))
assert m["format"] == 1 and m["name"] == "fixture" and m["study_file"] == f"{T}/study.ini", m["name"]
p = m["parameters"]
assert p["modes"] == ["strong", "weak"] and p["nodes"] == [1, 2] and p["ranks_per_node"] == 1, p
assert p["run_length"] == {"steps": 40} and p["repeats"] == 2 and p["chain"] is True, p
assert p["lr_scaling"]["rule"] == "linear" and p["lr_scaling"]["reference_batch"] == 32, p["lr_scaling"]
# Independent expectation: every (mode, nodes, repeat), repeat by repeat.
expected = []
for repeat in (1, 2):
    for mode in ("strong", "weak"):
        for nodes in (1, 2):
            ranks = nodes
            per_rank = 32 // ranks if mode == "strong" else 16
            k = 2 if per_rank > 16 else 1
            batch = per_rank // k
            global_batch = ranks * batch * k
            expected.append({"id": f"resnet20/{mode}-n{nodes}-r{repeat}", "nodes": nodes, "ranks": ranks,
                             "global_batch": global_batch, "batch_per_rank": batch, "accumulate_steps": k,
                             "base_lr": 0.1 * global_batch / 32, "repeat": repeat, "seed": 7 + repeat - 1})
runs = m["runs"]
assert [r["id"] for r in runs] == [e["id"] for e in expected], [r["id"] for r in runs]
dry = [shlex.split(re.match(r"^job\d+=\$\((.*)\)$", line).group(1))
       for line in open(dry_run).read().splitlines() if line.startswith("job")]
no_dependency = lambda argv: [a for a in argv if not a.startswith("--dependency=")]
previous = None
for run, exp, dry_argv in zip(runs, expected, dry):
    for key in ("nodes", "ranks", "global_batch", "batch_per_rank", "accumulate_steps", "repeat"):
        assert run[key] == exp[key], (run["id"], key, run[key], exp[key])
    assert math.isclose(run["base_lr"], exp["base_lr"]), (run["id"], run["base_lr"], exp["base_lr"])
    assert run["output_dir"] == f"{T}/study/{run['id']}" and os.path.isdir(run["output_dir"]), run["output_dir"]
    first = run["submissions"][0]
    argv = shlex.split(first["sbatch"])
    # chained: each run waits for the one before it
    dependency = [a for a in argv if a.startswith("--dependency=")]
    assert dependency == ([f"--dependency=afterany:{previous}"] if previous else []), (run["id"], dependency)
    previous = first["job_id"]
    assert no_dependency(argv) == no_dependency(dry_argv), (run["id"], argv, dry_argv)
    for option in (f"--nodes={exp['nodes']}", "--ntasks-per-node=1", "--time=00:10:00", "--cpus-per-task=1",
                   f"--output={T}/study/logs/%x-%j.out"):
        assert option in argv, (run["id"], option, argv)
    assert ("--accumulate-steps" in argv) == (exp["accumulate_steps"] > 1), argv
    # what the trainer was given, as it recorded it
    report = json.load(open(f"{run['output_dir']}/report.json")) if os.path.exists(f"{run['output_dir']}/report.json") else None
    if run["id"] in ("resnet20/strong-n2-r1", "resnet20/strong-n1-r2"):
        assert report is None, (run["id"], "has a report.json although it failed")
        continue
    c = report["config"]
    assert report["world_size"] == exp["ranks"] and report["global_batch_size"] == exp["global_batch"], run["id"]
    assert c["batch_size"] == exp["batch_per_rank"] and c.get("accumulate_steps", 1) == exp["accumulate_steps"], c
    assert math.isclose(c["base_lr"], exp["base_lr"]) and c["seed"] == exp["seed"], (c["base_lr"], c["seed"])
    assert report["steps"] == 40 and report["status"] == "max_steps", (run["id"], report["status"])
    assert len(set(report["hosts"])) == exp["nodes"], report["hosts"]
report_line = shlex.split(m["report_submissions"][0]["sbatch"])
assert f"--dependency=afterany:{':'.join(r['job_id'] for r in runs)}" in report_line, report_line
print(f"ok: study.json: 8 runs as expected (1-node strong: 2 x 16 accumulated, lr by the linear rule), "
      f"chained, the dry run's lines; 6 report.json files agree")
PY

echo "== status lists the two failed runs"
"${STUDY_TOOL[@]}" status "$T/study" | tee "$T/status1.out"
grep -Eq "^resnet20/strong-n2-r1 +$cancelled +CANCELLED +- +- +failed$" "$T/status1.out" || fail "cancelled run not failed"
grep -Eq "^resnet20/strong-n1-r2 +$killed +FAILED +- +- +failed$" "$T/status1.out" || fail "killed run not failed"
[ "$(grep -Ec " COMPLETED +max_steps +40 +done$" "$T/status1.out")" -eq 6 ] || fail "not 6 runs done"
grep -q "^8 runs: 6 done, 2 failed$" "$T/status1.out" || fail "wrong summary line"
if [ -f "$SOURCE/src/study/scaletrain_report.py" ]; then
  $PY - "$T/study/report" <<'PY'
import json, sys
d = json.load(open(sys.argv[1] + "/scaling.json"))
assert d["counts"]["planned"] == 8 and d["counts"]["used"] == 6, d["counts"]
assert d["counts"]["missing"] + d["counts"]["failed"] == 2, d["counts"]
md = open(sys.argv[1] + "/scaling.md").read()
section = md.split("## Missing and failed runs", 1)[1].split("\n## ", 1)[0]
for run in ("resnet20/strong-n2-r1", "resnet20/strong-n1-r2"):
    assert run in section, (run, section)
print("ok: the first report lists both failed runs under 'Missing and failed runs'")
PY
fi

echo "== resubmit --failed"
"${STUDY_TOOL[@]}" resubmit "$T/study" --failed | tee "$T/resubmit.out"
[ "$(grep -c '^resubmitted ' "$T/resubmit.out")" -eq 2 ] || fail "not 2 runs resubmitted"
report_job2=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["report_job_id"])' "$T/study/study.json")
[ "$report_job2" != "$report_job" ] || fail "no new report job"
wait_job "$report_job2" 300 || fail "the second report job did not finish"
"${STUDY_TOOL[@]}" status "$T/study" | tee "$T/status2.out"
grep -q "^8 runs: 8 done$" "$T/status2.out" || fail "not every run done after the resubmission"
$PY - "$T/study" "$cancelled" "$killed" <<'PY'
import json, sys
study, cancelled, killed = sys.argv[1:]
m = json.load(open(study + "/study.json"))
for run in m["runs"]:
    jobs = [s["job_id"] for s in run["submissions"]]
    if run["id"] in ("resnet20/strong-n2-r1", "resnet20/strong-n1-r2"):
        assert len(jobs) == 2 and jobs[0] in (cancelled, killed) and run["job_id"] == jobs[1], (run["id"], jobs)
        first, again = run["submissions"][0]["sbatch"].split(), run["submissions"][1]["sbatch"].split()
        assert [a for a in first if "--dependency" not in a] == [a for a in again if "--dependency" not in a]
    else:
        assert len(jobs) == 1, (run["id"], jobs)
killed_report = json.load(open(study + "/resnet20/strong-n1-r2/report.json"))
segments = killed_report["segments"]
# The killed job trained past step 6 and left a checkpoint (every 4 steps): its rerun continued from there.
assert [s["reason"] for s in segments] == ["lost", "max_steps"], segments
resumed_at = segments[1]["first_step"]
assert segments[0]["last_step"] == resumed_at and resumed_at % 4 == 0 and 4 <= resumed_at < 40, segments
assert killed_report["steps"] == 40 and killed_report["config"]["accumulate_steps"] == 2, killed_report["steps"]
fresh = json.load(open(study + "/resnet20/strong-n2-r1/report.json"))
assert [s["reason"] for s in fresh["segments"]] == ["max_steps"] and fresh["steps"] == 40, fresh["segments"]
print(f"ok: the two runs were resubmitted alone; the killed one resumed from step {resumed_at}, the cancelled "
      f"one started afresh")
PY

if [ ! -f "$SOURCE/src/study/scaletrain_report.py" ]; then
  echo "slurm study test passed (src/study/scaletrain_report.py not present: report not checked)"
  exit 0
fi
echo "== the report against each run's report.json"
$PY - "$T/study" <<'PY'
import csv, json, math, statistics, sys, glob, os
import xml.etree.ElementTree as ET
study = sys.argv[1]
m = json.load(open(study + "/study.json"))
reports = {r["id"]: json.load(open(r["output_dir"] + "/report.json")) for r in m["runs"]}
close = lambda a, b: math.isclose(float(a), float(b), rel_tol=1e-6)
# Independently: per (mode, nodes) the median over repeats, and speedup against 1 node.
points = {}
for run in m["runs"]:
    r = reports[run["id"]]
    thr = r["samples_trained"] / r["train_time_s"]
    assert close(thr, r["throughput"]["samples_per_s"]), (run["id"], thr)
    points.setdefault((run["mode"], run["nodes"]), []).append((r, thr))
expected = {}
for (mode, nodes), items in points.items():
    expected[(mode, nodes)] = {
        "ranks": items[0][0]["world_size"], "global_batch": items[0][0]["global_batch_size"],
        "batch_per_rank": items[0][0]["config"]["batch_size"],
        "accumulate_steps": items[0][0]["config"].get("accumulate_steps", 1),
        "throughput": statistics.median(t for _, t in items), "throughput_min": min(t for _, t in items),
        "throughput_max": max(t for _, t in items),
        "time_per_epoch": statistics.median(r["time_per_epoch_s"] for r, _ in items)}
for (mode, nodes), e in expected.items():
    base = expected[(mode, 1)]
    if mode == "strong":
        e["speedup"] = base["time_per_epoch"] / e["time_per_epoch"]
    else:
        e["speedup"] = e["throughput"] / base["throughput"]
    e["efficiency"] = e["speedup"] / (e["ranks"] / base["ranks"])
    if mode == "weak":
        assert close(e["efficiency"], e["throughput"] / (e["ranks"] * base["throughput"])), e
with open(study + "/report/scaling.csv", newline="") as handle:
    csv_rows = list(csv.DictReader(handle))
json_rows = json.load(open(study + "/report/scaling.json"))["rows"]
assert len(csv_rows) == len(json_rows) == 4, (len(csv_rows), len(json_rows))
for table, rows in (("csv", csv_rows), ("json", json_rows)):
    for row in rows:
        e = expected[(row["mode"], int(row["nodes"]))]
        assert row["model"] == "resnet20" and int(row["runs_used"]) == 2, row
        for key in ("ranks", "global_batch", "batch_per_rank", "accumulate_steps"):
            assert int(row[key]) == e[key], (table, row["mode"], row["nodes"], key, row[key], e[key])
        for key, ours in (("throughput_samples_per_s", "throughput"), ("throughput_min_samples_per_s", "throughput_min"),
                          ("throughput_max_samples_per_s", "throughput_max"), ("time_per_epoch_s", "time_per_epoch"),
                          ("speedup", "speedup"), ("efficiency", "efficiency")):
            assert close(row[key], e[ours]), (table, row["mode"], row["nodes"], key, row[key], e[ours])
        assert close(row["throughput_per_rank_samples_per_s"], e["throughput"] / e["ranks"]), (table, row)
plots = sorted(glob.glob(study + "/report/plots/*"))
pngs = [p for p in plots if p.endswith(".png")]
svgs = [p for p in plots if p.endswith(".svg")]
assert len(pngs) >= 4 and {p[:-4] for p in pngs} == {s[:-4] for s in svgs}, plots
for p in pngs:
    with open(p, "rb") as handle:
        assert handle.read(8) == b"\x89PNG\r\n\x1a\n" and os.path.getsize(p) > 1000, p
for s in svgs:
    root = ET.parse(s).getroot()
    assert root.tag in ("svg", "{http://www.w3.org/2000/svg}svg"), (s, root.tag)
counts = json.load(open(study + "/report/scaling.json"))["counts"]
assert counts["used"] == 8 and counts["missing"] == counts["failed"] == 0, counts
print(f"ok: scaling.csv and scaling.json match the runs' report.json (medians, min/max, speedup, efficiency); "
      f"{len(pngs)} PNG and {len(svgs)} SVG plots are valid")
PY
echo "== a series inside one node, submitted: status, study.json and the report name its points"
# One strong series on 1 and 2 ranks of one node (gpus = 1,2), 4 steps each: study.json records the
# series and its model, status lists its runs done, and the report's rows are the series' points
# g1 and g2 (speedup against g1).
cat > "$T/in-node.ini" <<EOF
[study]
name = in-node
output = $T/in-node-study
mode = strong
gpus = 1,2
ranks-per-node = 2
global-batch = 32
max-batch-per-rank = 16
steps = 4
time = 00:10:00
sbatch-options = --cpus-per-task=1

[series r20-in-node]
model = resnet20
data = data
EOF
"${STUDY_TOOL[@]}" submit "$T/in-node.ini" > "$T/in-node-submit.out" || fail "in-node submit: $(cat "$T/in-node-submit.out")"
in_node_report=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["report_job_id"])' "$T/in-node-study/study.json")
wait_job "$in_node_report" 300 || fail "the in-node report job did not finish: $(tail -n 20 "$T"/in-node-study/logs/*.out)"
"${STUDY_TOOL[@]}" status "$T/in-node.ini" > "$T/in-node-status.out"
grep -q "^2 runs: 2 done$" "$T/in-node-status.out" || fail "in-node runs not done: $(cat "$T/in-node-status.out")"
$PY - "$T/in-node-study" <<'PY' || fail "in-node study.json or report"
import csv, json, sys
study = sys.argv[1]
m = json.load(open(study + "/study.json"))
runs = {r["id"]: r for r in m["runs"]}
assert sorted(runs) == ["r20-in-node/strong-g1-r1", "r20-in-node/strong-g2-r1"], sorted(runs)
for rid, ranks in (("r20-in-node/strong-g1-r1", 1), ("r20-in-node/strong-g2-r1", 2)):
    r = runs[rid]
    assert (r["series"], r["model"], r["nodes"], r["ranks_per_node"], r["ranks"]) == ("r20-in-node", "resnet20", 1, ranks, ranks), r
    assert r["output_dir"] == f"{study}/{rid}" and json.load(open(r["output_dir"] + "/report.json"))["world_size"] == ranks
assert m["parameters"]["models"][0]["series"] == "r20-in-node" and m["parameters"]["models"][0]["gpus"] == [1, 2]
rows = list(csv.DictReader(open(study + "/report/scaling.csv")))
assert [(r["model"], r["model_name"], r["point"], r["nodes"], r["ranks"]) for r in rows] == \
    [("r20-in-node", "resnet20", "g1", "1", "1"), ("r20-in-node", "resnet20", "g2", "1", "2")], rows
assert float(rows[0]["speedup"]) == 1.0 and float(rows[1]["speedup"]) > 0, rows
md = open(study + "/report/scaling.md").read()
assert "against 1 GPU of one node" in md and "| 1 (2 GPUs) | 2 |" in md, md
print("ok: a series inside one node: study.json, status and the report's points g1 and g2")
PY
echo "slurm study test passed"
