#!/usr/bin/env bash
# The Transformer's decoding (issue 25: the key/value cache and the reference's beam search) on the
# GPU against the CPU. transformer-tiny trains 3 epochs on the CPU on a synthetic reverse task (a
# model that has learnt something and is still unsure), then bin/scaletrain_torch_beam_search_helper
# loads its checkpoint on each device and translates 64 sentences of random words (source lengths
# 2 to 12) with beam search (beam 4, alpha 0.6, the source's length + 50 tokens at most) and
# greedily: the cache's steps, its row gathers (beams chosen, finished sentences dropped) and the
# products of one query position run on the GPU. Checks: each sentence's beam and greedy ids
# equal on both devices, the beam scores within 1e-4 (the devices' logits differ by rounding,
# about 1e-6: a different choice would need two hypotheses that close); then scaletrain eval
# --translations on each device writes the same 16 lines. Prints each device's decoding time.
# Skips (77) without a GPU.
source "$(dirname "$0")/lib.sh"
require_gpu
T=$TMP_ROOT/gpu_transformer_decoding
rm -rf "$T" && mkdir -p "$T"

"$BIN/scaletrain-data" synthetic --task translation --kind reverse --sentences 2000 --val-sentences 16 --words 20 \
  --max-length 10 --seed 3 --output "$T/data" >/dev/null || fail "scaletrain-data synthetic failed"
run_train train 1 cpu "" --model transformer-tiny --data "$T/data" --epochs 3 --batch-tokens 512 --warmup-steps 30 \
  --base-lr 0.003 --beam-size 1
checkpoint=$(ls "$T"/train/checkpoints/step-*.h5 | tail -n 1)
"$PY" - "$T/in.txt" <<'PY'
import random, sys
r = random.Random(5)
with open(sys.argv[1], "w") as f:
    f.write("4 0.6 50\n")  # beam_size alpha max_extra
    for _ in range(64):
        f.write(" ".join(str(r.randint(2, 21)) for _ in range(r.randint(1, 11))) + " 1\n")
PY
for device in "$DEV" cpu; do
  "$BIN/scaletrain_torch_beam_search_helper" transformer-tiny "$checkpoint" "$T/in.txt" - "$device" \
    >"$T/$device.txt" 2>&1 || fail "helper on $device: $(tail -n 5 "$T/$device.txt")"
  tail -n 1 "$T/$device.txt"
done
"$PY" - "$T/$DEV.txt" "$T/cpu.txt" <<'PY'
import re, sys
def parse(path):
    out = {}
    for line in open(path):
        m = re.match(r"sentence (\d+): beam([\d ]*) \(score (\S+), finished (\d)\); greedy([\d ]*)$", line.strip())
        if m:
            out[int(m[1])] = (m[2].split(), float(m[3]), m[4], m[5].split())
    return out
test, ref = parse(sys.argv[1]), parse(sys.argv[2])
if len(ref) != 64 or set(test) != set(ref):
    sys.exit(f"FAIL: {len(test)} and {len(ref)} sentences translated, expected 64 each")
bad = []
for i in sorted(ref):
    (ids, score, fin, greedy), (rids, rscore, rfin, rgreedy) = test[i], ref[i]
    if ids != rids or fin != rfin or abs(score - rscore) > 1e-4 * max(1.0, abs(rscore)) or greedy != rgreedy:
        bad.append(f"sentence {i}: {' '.join(ids)} ({score}) greedy {' '.join(greedy)}; "
                   f"cpu {' '.join(rids)} ({rscore}) greedy {' '.join(rgreedy)}")
finished = sum(ref[i][2] == "1" for i in ref)
differ = sum(ref[i][0] != ref[i][3] for i in ref)
print(f"64 sentences: {64 - len(bad)} alike on both devices; {finished} beam results finished, "
      f"{differ} differ from greedy decoding")
if bad:
    sys.exit("FAIL:\n  " + "\n  ".join(bad))
PY
# The same model's evaluation translations as text (scaletrain eval --translations, the path of
# scaletrain translate): the 16 sentences' lines alike on both devices.
for device in "$DEV" cpu; do
  "$BIN/scaletrain" eval --device "$device" --model transformer-tiny --checkpoint "$checkpoint" --data "$T/data" \
    --threads 1 --translations "$T/eval-$device.txt" >"$T/eval-$device.log" 2>&1 ||
    fail "eval --translations on $device: $(tail -n 5 "$T/eval-$device.log")"
done
[ "$(wc -l <"$T/eval-cpu.txt")" = 16 ] || fail "eval --translations wrote $(wc -l <"$T/eval-cpu.txt") lines, not 16"
cmp -s "$T/eval-$DEV.txt" "$T/eval-cpu.txt" ||
  fail "eval --translations differs between $DEV and cpu: $(diff "$T/eval-$DEV.txt" "$T/eval-cpu.txt" | head -n 6)"
echo "ok: eval --translations: the 16 evaluation sentences' translations alike on $DEV and cpu"
echo "PASS"
