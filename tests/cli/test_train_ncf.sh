#!/usr/bin/env bash
# NCF (--model ncf, the recommendation task) end to end with 2 MPI ranks, on a synthetic dataset
# with planted structure (users and items in 50 latent groups):
#  - HR@10 starts near chance (about 0.01) and reaches 0.5 (--target-accuracy) within 14 epochs;
#    report.json (task, quality metric, val_metrics, the model's defaults: Adam at a constant
#    learning rate) and mllog.txt (the NCF keys, eval_accuracy = HR@10) say so;
#  - a run cut by --max-steps and resumed ends with the weights, Adam state and report of an
#    uninterrupted one, bit for bit;
#  - an explicit option beats the model's default (--base-lr, --optimizer sgd);
#  - predict writes NeuMF's logits for (user, item) pairs from a file, as NeuMF computed in numpy
#    from the checkpoint's tensors does;
#  - bad input is a clear error naming the file and the index, on every rank, without a hang: an
#    item id out of range, a user without a held-out item, an empty split; a model of the other
#    task; image-only options; predict's ids out of range or missing, a checkpoint without
#    NeuMF's tables.
# Env (set by ctest): ST_BIN (build/bin), ST_SOURCE (repository), ST_TMP (scratch).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

W=$TMP_ROOT/train_ncf
MPIRUN=(mpirun --oversubscribe -np 2)
CK=("$PY" "${ST_SOURCE:-.}/tests/cli/checkpoints.py")
rm -rf "$W" && mkdir -p "$W"

# 2000 users x 2000 items, 20 positives each (the last held out), 999 evaluation negatives.
"$BIN/scaletrain-data" synthetic --task recommendation --users 2000 --items 2000 --groups 50 \
  --positives-per-user 20 --eval-negatives 999 --shards 2 --output "$W/data" >/dev/null
NCF=(--model ncf --data "$W/data" --batch-size 256 --threads 1 --log-every 0)

echo "== scaletrain info: the models and their tasks; NeuMF at MovieLens-20M's size"
info=$("$BIN/scaletrain" info)
for m in "resnet20  image_classification" "resnet50  image_classification" "ncf       recommendation"; do
  grep -qF "$m" <<<"$info" || fail "scaletrain info does not list '$m': $info"
done
"$BIN/scaletrain" info --model ncf --json | $PY -c '
import json, sys
d = json.load(sys.stdin)
users, items, layers, mf = 138493, 26744, [256, 256, 128, 64], 64
expected = (users + items) * (mf + layers[0] // 2) + sum((a + 1) * b for a, b in zip(layers, layers[1:])) + layers[-1] + mf + 1
names = [t["name"] for t in d["tensors"]]
assert d["parameters"] == expected == 31832577, (d["parameters"], expected)
assert names[:4] == ["mf_user_embed.weight", "mf_item_embed.weight", "mlp_user_embed.weight", "mlp_item_embed.weight"], names
assert names[-2:] == ["final.weight", "final.bias"] and d["task"] == "recommendation", names
print("ok: ncf has", d["parameters"], "parameters at ml-20m size")'
# Every model through its task: the header names the shape it was built for.
"$BIN/scaletrain" info --model ncf --num-users 10 --num-items 7 | grep -qF "ncf: 110337 parameters, 10 users x 7 items" ||
  fail "info --model ncf at 10 x 7: $("$BIN/scaletrain" info --model ncf --num-users 10 --num-items 7 | head -n 1)"
"$BIN/scaletrain" info --model resnet20 --num-classes 10 --input-shape 1,28,28 |
  grep -qF "resnet20: 272186 parameters, 28x28x1 images, 10 classes" ||
  fail "info --model resnet20: $("$BIN/scaletrain" info --model resnet20 --num-classes 10 --input-shape 1,28,28 | head -n 1)"
expect_failure "info with a huge input" "--input-shape '3,99999,32' is too large" \
  "$BIN/scaletrain" info --model resnet20 --input-shape 3,99999,32
expect_failure "info with no users" "--num-users and --num-items must be positive" \
  "$BIN/scaletrain" info --model ncf --num-users 0

echo "== HR@10 from chance to 0.5"
"${MPIRUN[@]}" "$BIN/scaletrain" train "${NCF[@]}" --epochs 14 --target-accuracy 0.5 --output-dir "$W/run" \
  >"$W/run.log" 2>&1 || fail "training failed: $(tail -n 20 "$W/run.log")"
grep -q "epoch 1 done .* val hr@10 0\.0" "$W/run.log" || fail "no HR@10 line for epoch 1: $(grep done "$W/run.log")"
$PY - "$W/run" <<'PY'
import json, sys
run = sys.argv[1]
r = json.load(open(run + "/report.json"))
epochs = r["epochs"]
hr = [e["val_accuracy"] for e in epochs]
print("HR@10 by epoch:", " ".join(f"{h:.3f}" for h in hr))
assert r["task"] == "recommendation" and r["quality_metric"] == "hr@10", (r["task"], r["quality_metric"])
assert hr[0] < 0.05, f"HR@10 after one epoch is {hr[0]}, expected near chance (10/1000)"
assert r["status"] == "target_reached" and hr[-1] >= 0.5 and max(hr[:-1]) < 0.5, (r["status"], hr)
assert r["final_val_accuracy"] == hr[-1] and r["time_to_target_s"] > 0
for e in epochs:
    m = e["val_metrics"]
    assert m["hr@10"] == e["val_accuracy"] and 0 < m["ndcg@10"] <= m["hr@10"], m
    assert e["val_loss"] is None
d = r["dataset"]
assert (d["task"], d["num_users"], d["num_items"], d["train_positives"]) == ("recommendation", 2000, 2000, 38000), d
assert d["train_samples"] == 5 * 38000 and d["val_samples"] == 2000 and d["eval_negatives"] == 999, d
# The model's defaults (models/registry.hpp) where the command line set nothing.
c = r["config"]
assert (c["optimizer"], c["lr_schedule"], c["base_lr"], c["adam_beta1"], c["adam_beta2"]) == \
    ("adam", "constant", 0.0045, 0.25, 0.5), c
assert r["optimizer_options"] == {"name": "adam", "beta1": 0.25, "beta2": 0.5, "epsilon": 1e-8}, r["optimizer_options"]
# NeuMF's parameters: (U + I) * (64 + 128) + MLP + final, all of them all-reduced every step.
params = 4000 * 192 + (256 * 256 + 256) + (256 * 128 + 128) + (128 * 64 + 64) + (64 + 64) + 1
assert r["parameters"] == params and r["allreduce_bytes_per_step"] == 4 * params, (r["parameters"], params)
# mllog.txt: NCF's benchmark and keys; eval_accuracy is HR@10.
log = {}
evals = []
for line in open(run + "/mllog.txt"):
    e = json.loads(line.split(":::MLLOG ", 1)[1])
    log.setdefault(e["key"], e["value"])
    if e["key"] == "eval_accuracy":
        evals.append(e["value"])
assert log["submission_benchmark"] == "ncf" and log["opt_name"] == "adam", log
assert log["input_hp_num_neg"] == 4 and log["eval_hp_num_neg"] == 999 and log["preproc_hp_num_eval"] == 999, log
assert log["model_hp_mf_dim"] == 64 and log["model_hp_mlp_layer_sizes"] == [256, 256, 128, 64], log
assert "model_bn_span" not in log and "label_smoothing" not in log, "image keys in an NCF log"
assert evals == hr, (evals, hr)
print("ok: report.json and mllog.txt")
PY

echo "== scaletrain eval of the run's checkpoint gives its last evaluation"
"${MPIRUN[@]}" "$BIN/scaletrain" eval --model ncf --checkpoint "$W/run" --data "$W/data" --threads 1 >"$W/eval.log" 2>&1 ||
  fail "eval: $(tail -n 5 "$W/eval.log")"
expected=$($PY -c "
import json
m = json.load(open('$W/run/report.json'))['epochs'][-1]['val_metrics']
print(f\"hr@10 {m['hr@10']:.4f}, ndcg@10 {m['ndcg@10']:.4f} on $W/data/val (2000 users)\")")
grep -qF "$expected" "$W/eval.log" || fail "eval printed $(tail -n 1 "$W/eval.log"), expected '$expected'"
echo "ok: eval: $expected"
expect_failure "eval of another split" "--split train: --model ncf evaluates its dataset's val split" \
  "$BIN/scaletrain" eval --model ncf --checkpoint "$W/run" --data "$W/data" --split train
# eval reads the split it evaluates and nothing else: a dataset of its val split alone will do.
mkdir -p "$W/val-only" && cp -r "$W/data/val" "$W/val-only/"
"$BIN/scaletrain" eval --model ncf --checkpoint "$W/run" --data "$W/val-only" --threads 1 >"$W/eval-val-only.log" 2>&1 ||
  fail "eval of a val split alone: $(tail -n 5 "$W/eval-val-only.log")"
grep -qF "${expected/$W\/data/$W/val-only}" "$W/eval-val-only.log" ||
  fail "eval of a val split alone printed $(tail -n 1 "$W/eval-val-only.log")"
"$BIN/scaletrain-data" synthetic --task image_classification --samples 8 --val-samples 8 --image-size 8,8,1 \
  --classes 2 --output "$W/eval-images" >/dev/null
expect_failure "eval of an image dataset" "dataset $W/eval-images is for the image classification task, but --model ncf is a recommendation model" \
  "$BIN/scaletrain" eval --model ncf --checkpoint "$W/run" --data "$W/eval-images"

echo "== predict: NeuMF's logits for (user, item) pairs, against NeuMF in numpy from the checkpoint's tensors"
help=$("$BIN/scaletrain" predict --help)
grep -qF "ncf: datasets 'users' and 'items' int32 [N]" <<<"$help" || fail "predict --help lacks ncf's input: $help"
grep -qF "dataset 'inputs' float32 [N, C, H, W]" <<<"$help" || fail "predict --help lacks the images' input: $help"
# 1000 pairs (not a multiple of --batch-size 64), the tables' first and last rows among them.
$PY - "$W" <<'PY'
import sys, h5py, numpy as np
W = sys.argv[1]
rng = np.random.default_rng(5)
users, items = rng.integers(0, 2000, 1000).astype(np.int32), rng.integers(0, 2000, 1000).astype(np.int32)
users[:2], items[:2] = [0, 1999], [1999, 0]
with h5py.File(W + "/pairs.h5", "w") as f:
    f["users"], f["items"] = users, items
with h5py.File(W + "/bad-item.h5", "w") as f:
    f["users"], f["items"] = users[:5], np.where(np.arange(5) == 3, 2000, items[:5]).astype(np.int32)
with h5py.File(W + "/no-users.h5", "w") as f:
    f["items"] = items
with h5py.File(W + "/wide-ids.h5", "w") as f:
    f["users"], f["items"] = users.astype(np.int64), items
PY
"${MPIRUN[@]}" "$BIN/scaletrain" predict --model ncf --checkpoint "$W/run" --input "$W/pairs.h5" \
  --output "$W/pairs-logits.h5" --threads 1 >"$W/predict.log" 2>&1 || fail "predict: $(tail -n 5 "$W/predict.log")"
grep -qF "wrote logits [1000] to $W/pairs-logits.h5" "$W/predict.log" || fail "predict said: $(tail -n 1 "$W/predict.log")"
$PY - "$W" <<'PY'
import os, sys, h5py, numpy as np
W = sys.argv[1]
ck = os.path.join(W, "run", "checkpoints", open(os.path.join(W, "run", "checkpoints", "latest")).read().strip())
with h5py.File(ck, "r") as f:
    t = {k: np.array(v, dtype=np.float64) for k, v in f["model"].items()}
with h5py.File(W + "/pairs.h5", "r") as f:
    u, i = np.array(f["users"]), np.array(f["items"])
with h5py.File(W + "/pairs-logits.h5", "r") as f:
    got = np.array(f["logits"])
    assert got.dtype == np.float32 and got.shape == (1000,), (got.dtype, got.shape)
    assert f.attrs["model"] == "ncf" and f.attrs["checkpoint"] == W + "/run", dict(f.attrs)
    assert "before the sigmoid" in f["logits"].attrs["description"], dict(f["logits"].attrs)
# NeuMF (the MLPerf reference's forward) in float64: GMF product, MLP with ReLU after every layer, final.
gmf = t["mf_user_embed.weight"][u] * t["mf_item_embed.weight"][i]
mlp = np.concatenate([t["mlp_user_embed.weight"][u], t["mlp_item_embed.weight"][i]], axis=1)
for k in range(len([k for k in t if k.startswith("mlp.") and k.endswith(".weight")])):
    mlp = np.maximum(mlp @ t[f"mlp.{k}.weight"].T + t[f"mlp.{k}.bias"], 0.0)
want = (np.concatenate([gmf, mlp], axis=1) @ t["final.weight"].T + t["final.bias"])[:, 0]
err = np.abs(got - want).max()
assert want.std() > 0.5, f"the trained model's logits barely vary ({want.std()}): a weak check"
assert err <= 1e-5 * (1 + np.abs(want).max()), f"predict's logits differ from NeuMF's by {err}"
print(f"ok: 1000 logits match NeuMF in float64 (max |diff| {err:.2g}, logits in [{want.min():.2f}, {want.max():.2f}])")
PY
expect_failure "predict of an item out of range" "--input $W/bad-item.h5: items[3] = 2000 is out of range [0, 2000)" \
  "${MPIRUN[@]}" "$BIN/scaletrain" predict --model ncf --checkpoint "$W/run" --input "$W/bad-item.h5" --output "$W/bad.h5"
expect_failure "predict without users" "--input $W/no-users.h5 has no dataset 'users'" \
  "$BIN/scaletrain" predict --model ncf --checkpoint "$W/run" --input "$W/no-users.h5" --output "$W/bad.h5"
expect_failure "predict of int64 ids" "--input $W/wide-ids.h5: dataset 'users' is int64, expected int32" \
  "$BIN/scaletrain" predict --model ncf --checkpoint "$W/run" --input "$W/wide-ids.h5" --output "$W/bad.h5"
[ ! -e "$W/bad.h5" ] && [ ! -e "$W/bad.h5.tmp" ] || fail "a failed predict left an output"
expect_failure "predict of another model's checkpoint" "is for model ncf, not resnet20" \
  "$BIN/scaletrain" predict --model resnet20 --checkpoint "$W/run" --input "$W/pairs.h5" --output "$W/bad.h5"
# Checkpoints that do not say NeuMF's shape (format-1 files, as PyTorch users write them).
$PY - "$W" <<'PY'
import os, sys, h5py, numpy as np
W = sys.argv[1]
ck = os.path.join(W, "run", "checkpoints", open(os.path.join(W, "run", "checkpoints", "latest")).read().strip())
with h5py.File(ck, "r") as f:
    t = {k: np.array(v) for k, v in f["model"].items()}
for name, change in [("no-item-table", lambda t: t.pop("mf_item_embed.weight")),
                     ("flat-user-table", lambda t: t.update({"mf_user_embed.weight": t["mf_user_embed.weight"][:, 0]}))]:
    tensors = dict(t)
    change(tensors)
    with h5py.File(f"{W}/{name}.h5", "w") as f:
        f.attrs.update({"scaletrain_checkpoint_format": 1, "model": "ncf", "epoch": 0, "step": 0})
        for k, v in tensors.items():
            f[f"model/{k}"] = v
PY
expect_failure "predict from a checkpoint without an item table" \
  "checkpoint $W/no-item-table.h5 has no model/mf_item_embed.weight" \
  "$BIN/scaletrain" predict --model ncf --checkpoint "$W/no-item-table.h5" --input "$W/pairs.h5" --output "$W/bad.h5"
expect_failure "predict from a checkpoint with a 1-d user table" \
  "checkpoint $W/flat-user-table.h5: model/mf_user_embed.weight has shape [2000], expected [users, factors]" \
  "$BIN/scaletrain" predict --model ncf --checkpoint "$W/flat-user-table.h5" --input "$W/pairs.h5" --output "$W/bad.h5"

echo "== --max-steps then resume equals an uninterrupted run"
"${MPIRUN[@]}" "$BIN/scaletrain" train "${NCF[@]}" --epochs 2 --output-dir "$W/whole" >"$W/whole.log" 2>&1 ||
  fail "uninterrupted run: $(tail -n 20 "$W/whole.log")"
"${MPIRUN[@]}" "$BIN/scaletrain" train "${NCF[@]}" --epochs 2 --max-steps 500 --output-dir "$W/cut" >"$W/cut.log" 2>&1 ||
  fail "cut run: $(tail -n 20 "$W/cut.log")"
"${MPIRUN[@]}" "$BIN/scaletrain" train "${NCF[@]}" --epochs 2 --resume auto --output-dir "$W/cut" >>"$W/cut.log" 2>&1 ||
  fail "resumed run: $(tail -n 20 "$W/cut.log")"
grep -q "resumed from $W/cut/checkpoints/step-000000500.h5" "$W/cut.log" || fail "no resume: $(tail -n 5 "$W/cut.log")"
"${CK[@]}" same "$W/whole" "$W/cut"
$PY - "$W/whole" "$W/cut" <<'PY'
import json, sys
a, b = (json.load(open(d + "/report.json")) for d in sys.argv[1:])
strip = lambda es: [{k: e[k] for k in ("epoch", "steps", "train_loss", "val_accuracy", "val_metrics")} for e in es]
assert strip(a["epochs"]) == strip(b["epochs"]), (a["epochs"], b["epochs"])
print("ok: the resumed run's epochs equal the uninterrupted run's:", [e["val_accuracy"] for e in a["epochs"]])
PY

echo "== options on the command line beat the model's defaults"
"${MPIRUN[@]}" "$BIN/scaletrain" train "${NCF[@]}" --epochs 1 --max-steps 2 --optimizer sgd --base-lr 0.5 \
  --lr-schedule cosine --weight-decay 0 --output-dir "$W/sgd" >"$W/sgd.log" 2>&1 || fail "sgd run: $(tail -n 20 "$W/sgd.log")"
$PY -c "
import json, sys
c = json.load(open('$W/sgd/report.json'))['config']
assert (c['optimizer'], c['base_lr'], c['lr_schedule']) == ('sgd', 0.5, 'cosine'), c
print('ok: --optimizer sgd --base-lr 0.5 --lr-schedule cosine kept')"

echo "== --optimizer lazy_adam: a step moves only the table rows it looked up; adam moves more"
# Three steps of 2 x 256 samples, a checkpoint after each: between steps 2 and 3 LazyAdam changes
# at most 512 rows of a user table (its weights and both moments together), Adam also the rows of
# steps 1 and 2 on their momentum.
for opt in lazy_adam adam; do
  "${MPIRUN[@]}" "$BIN/scaletrain" train "${NCF[@]}" --epochs 1 --max-steps 3 --optimizer "$opt" \
    --checkpoint-every-steps 1 --keep-checkpoints 3 --output-dir "$W/$opt" >"$W/$opt.log" 2>&1 ||
    fail "$opt run: $(tail -n 20 "$W/$opt.log")"
done
$PY - "$W" <<'PY'
import h5py, json, sys
import numpy as np
W = sys.argv[1]
def changed(run, table="mf_user_embed.weight"):
    a, b = (h5py.File(f"{W}/{run}/checkpoints/step-{s:09d}.h5", "r") for s in (2, 3))
    rows = lambda name: np.any(a[name][()] != b[name][()], axis=1)
    w = rows(f"model/{table}")
    m, v = rows(f"optimizer/{table}"), rows(f"optimizer/{table}.exp_avg_sq")
    return w, m, v
lw, lm, lv = changed("lazy_adam")
aw, _, _ = changed("adam")
assert (lw == lm).all() and (lw == lv).all(), "lazy_adam: a row's weights and moments must change together"
assert 0 < lw.sum() <= 512 < aw.sum(), (int(lw.sum()), int(aw.sum()))
log = [json.loads(l[9:]) for l in open(f"{W}/lazy_adam/mllog.txt") if l.startswith(":::MLLOG ")]
assert [e["value"] for e in log if e["key"] == "opt_name"] == ["lazy_adam"]
print(f"ok: step 3 changed {int(lw.sum())} user rows under lazy_adam, {int(aw.sum())} under adam")
PY

echo "== inputs/ncf_movielens.ini: the MLPerf hyperparameters, as a config file"
"$BIN/scaletrain" train --config "${ST_SOURCE:-.}/inputs/ncf_movielens.ini" --data "$W/data" --batch-size 256 \
  --max-steps 2 --threads 1 --output-dir "$W/ini" >"$W/ini.log" 2>&1 || fail "the config: $(tail -n 20 "$W/ini.log")"
$PY -c "
import json
r = json.load(open('$W/ini/report.json'))
c = r['config']
got = (c['model'], c['optimizer'], c['base_lr'], c['adam_beta1'], c['adam_beta2'], c['adam_epsilon'], c['lr_schedule'],
       c['weight_decay'], r['target_accuracy'], c['epochs'])
assert got == ('ncf', 'adam', 0.0045, 0.25, 0.5, 1e-8, 'constant', 0.0, 0.635, 20), got
print('ok: inputs/ncf_movielens.ini', got)"

echo "== threads and the cores a rank is bound to"
# mpirun binds a lone rank to one core: --threads 2 there is warned about, and the default is 1.
mpirun -np 1 --bind-to core "$BIN/scaletrain" train --model ncf --data "$W/data" --batch-size 256 --log-every 0 \
  --threads 2 --max-steps 1 --output-dir "$W/bound" >"$W/bound.log" 2>&1 || fail "bound run: $(tail -n 5 "$W/bound.log")"
grep -qF "2 threads per rank (--threads) but this rank may run on only 1 core (its CPU binding)" "$W/bound.log" ||
  fail "no warning about 2 threads on 1 core: $(head -n 5 "$W/bound.log")"
mpirun -np 1 --bind-to core "$BIN/scaletrain" train --model ncf --data "$W/data" --batch-size 256 --log-every 0 \
  --max-steps 1 --output-dir "$W/bound" --overwrite >"$W/bound.log" 2>&1 || fail "bound run: $(tail -n 5 "$W/bound.log")"
grep -qF "1 rank on 1 host, 1 thread per rank" "$W/bound.log" || fail "default threads of a rank bound to one core: $(head -n 3 "$W/bound.log")"
! grep -q "may run on only" "$W/bound.log" || fail "a warning with the default threads: $(head -n 3 "$W/bound.log")"
echo "ok: --threads 2 on one bound core is warned about; the default is 1 thread there"

echo "== bad input: clear errors on every rank, no hang"
# damaged SPLIT CODE: a copy of the dataset whose SPLIT shards h5py changed with CODE (f: the
# first shard, opened for writing); the manifest goes, so that the reader's own checks speak.
damaged() {
  local name=$1 split=$2 code=$3
  rm -rf "$W/$name" && cp -r "$W/data" "$W/$name" && rm -f "$W/$name/train/manifest.json" "$W/$name/val/manifest.json"
  $PY - "$W/$name/$split" <<PY
import glob, sys, h5py, numpy as np
f = h5py.File(sorted(glob.glob(sys.argv[1] + "/*.h5"))[0], "r+")
$code
f.close()
PY
}
damaged item_range train 'f["item"][7] = f.attrs["num_items"]'
expect_failure "item id out of range" "item[7] = 2000 is out of range [0, 2000)" \
  "${MPIRUN[@]}" "$BIN/scaletrain" train --model ncf --data "$W/item_range" --output-dir "$W/bad"
damaged no_heldout val 'u = f["user"][:]; i = f["item"][:]; n = f["negatives"][:]
for k in ("user", "item", "negatives"): del f[k]
f["user"] = u[1:]; f["item"] = i[1:]; f["negatives"] = n[1:]'
expect_failure "a user without a held-out item" "has no held-out item" \
  "${MPIRUN[@]}" "$BIN/scaletrain" train --model ncf --data "$W/no_heldout" --output-dir "$W/bad"
rm -rf "$W/empty" && cp -r "$W/data" "$W/empty" && rm -f "$W/empty/train/manifest.json"
$PY - "$W/empty/train" <<'PY'
import glob, sys, h5py, numpy as np
for p in sorted(glob.glob(sys.argv[1] + "/*.h5")):
    with h5py.File(p, "r+") as f:
        for k in ("user", "item"):
            del f[k]
            f[k] = np.zeros(0, np.int32)
PY
expect_failure "an empty split" "the shards hold no positives (an empty split)" \
  "${MPIRUN[@]}" "$BIN/scaletrain" train --model ncf --data "$W/empty" --output-dir "$W/bad"
"$BIN/scaletrain-data" synthetic --samples 64 --image-size 8,8,3 --classes 4 --output "$W/images" >/dev/null
expect_failure "ncf on image data" "dataset $W/images is for the image classification task, but --model ncf is a recommendation model" \
  "${MPIRUN[@]}" "$BIN/scaletrain" train --model ncf --data "$W/images" --output-dir "$W/bad"
expect_failure "resnet20 on recommendation data" "is for the recommendation task, but --model resnet20 is an image classification model" \
  "${MPIRUN[@]}" "$BIN/scaletrain" train --model resnet20 --data "$W/data" --output-dir "$W/bad"
"$BIN/scaletrain-data" synthetic --task recommendation --users 1000 --items 2000 --groups 50 --positives-per-user 20 \
  --eval-negatives 99 --output "$W/fewer_users" >/dev/null
expect_failure "--init-from a model of other sizes" "dataset $W/fewer_users has 1000 users but model/mf_user_embed.weight in checkpoint" \
  "${MPIRUN[@]}" "$BIN/scaletrain" train --model ncf --data "$W/fewer_users" --init-from "$W/run" --output-dir "$W/bad"
expect_failure "label smoothing" "--label-smoothing is for image classification" \
  "$BIN/scaletrain" train --model ncf --data "$W/data" --label-smoothing 0.1 --output-dir "$W/bad"
no_scaletrain_left
echo "ncf tests passed"
