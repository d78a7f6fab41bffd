"""The Transformer's decoding (models/transformer.hpp: translate_beam and translate_greedy on the
key/value cache, models/beam_search.hpp) against the MLPerf reference's algorithm on PyTorch.

transformer-tiny trains for 3 epochs (114 steps, about 6 s) on a synthetic reverse task (BLEU
about 27: a model that has learnt something and is still unsure), and
bin/scaletrain_torch_beam_search_helper loads its checkpoint and translates 16 sentences (the 12
held-out ones and 4 of random words, source lengths 3 to 12) with beam search (beam 4, alpha 0.6;
beam 3, alpha 0) and greedily, max_decode_length = the source's length + 50. Here the same
checkpoint loads into torch.nn.Transformer(norm_first=True) in float64 by the checkpoint's names
(docs/models.md), and beam_search_reference.py (a numpy port of the reference's beam_search.py,
float64 log-softmax) decodes each sentence alone, recomputing the whole prefix each step (no
cache): the ids must be equal and the scores within 1e-5. The smallest margin of the port's
top-k decisions is printed: our float32 logits are within ~1e-6 of float64, far below it.
Greedy decoding is compared with the argmax loop on the same torch model. Exits non-zero on any
mismatch."""
import glob
import os
import shutil
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
from beam_search_reference import sequence_beam_search, trim  # noqa: E402
from transformer_reference import Reference  # noqa: E402
from torch_reference import ST_BIN, ST_TMP, run  # noqa: E402
import h5py  # noqa: E402

torch.set_num_threads(1)
HELPER = os.path.join(ST_BIN, "scaletrain_torch_beam_search_helper")
root = os.path.join(ST_TMP, "torch_beam_search")
shutil.rmtree(root, ignore_errors=True)
os.makedirs(root)
failures = []
start = time.time()

MODEL, D, H, F, LAYERS = "transformer-tiny", 128, 4, 512, 2
MAX_EXTRA, EOS = 50, 1
data, run_dir = os.path.join(root, "data"), os.path.join(root, "run")
run([os.path.join(ST_BIN, "scaletrain-data"), "synthetic", "--task", "translation", "--kind", "reverse", "--sentences",
     "2000", "--val-sentences", "12", "--words", "20", "--max-length", "10", "--seed", "3", "--output", data])
run([os.path.join(ST_BIN, "scaletrain"), "train", "--model", MODEL, "--data", data, "--output-dir", run_dir,
     "--threads", "1", "--epochs", "3", "--eval-every", "3", "--batch-tokens", "512", "--warmup-steps", "30",
     "--base-lr", "0.003"])
checkpoint = sorted(glob.glob(os.path.join(run_dir, "checkpoints", "step-*.h5")))[-1]
trained = time.time()

with h5py.File(glob.glob(os.path.join(data, "val", "*.h5"))[0], "r") as f:
    tokens, offsets = f["source_tokens"][()], f["source_offsets"][()]
    sentences = [tokens[offsets[i]:offsets[i + 1]].tolist() for i in range(len(offsets) - 1)]
with h5py.File(checkpoint, "r") as f:
    params = {}
    f["model"].visititems(lambda k, v: params.__setitem__(k, v[()]) if isinstance(v, h5py.Dataset) else None)
V = params["embedding.weight"].shape[0]
rng = np.random.default_rng(4)
for length in (3, 7, 10, 12):
    sentences.append(rng.integers(2, V, length - 1).tolist() + [EOS])
lengths = np.array([len(s) for s in sentences], dtype=np.int32)
N, LS = len(sentences), int(lengths.max())
source = np.zeros((N, LS), np.int32)
for n, s in enumerate(sentences):
    source[n, :len(s)] = s


def load():
    model = Reference(V, D, H, F, LAYERS).double()
    state = {(k if k == "embedding.weight" else "transformer." + k): torch.tensor(v, dtype=torch.float64)
             for k, v in params.items()}
    missing = set(dict(model.named_parameters())) - set(state)
    if missing:
        failures.append(f"parameters torch has and the checkpoint lacks: {sorted(missing)}")
    model.load_state_dict(state, strict=False)
    model.train()  # dropout is 0; train mode keeps nn.Transformer off its nested-tensor fast path
    return model


def ours(beam, alpha):
    path, out_path = os.path.join(root, f"in-{beam}.h5"), os.path.join(root, f"out-{beam}.h5")
    with h5py.File(path, "w") as f:
        f.attrs.update(beam_size=beam, max_extra=MAX_EXTRA)
        f.attrs["alpha"] = np.float64(alpha)
        f["source"], f["source_lengths"] = source, lengths
    run([HELPER, MODEL, checkpoint, path, out_path])
    out = h5py.File(out_path, "r")
    strip = lambda row: [int(x) for x in row if x >= 0]  # noqa: E731
    return ([strip(r) for r in out["beam_ids"][()]], list(out.attrs["beam_scores"]), out["beam_finished"][()],
            [strip(r) for r in out["greedy_ids"][()]])


model = load()
with torch.no_grad():
    for beam, alpha in ((4, 0.6), (3, 0.0)):
        beam_ids, beam_scores, beam_finished, greedy_ids = ours(beam, alpha)
        smallest_margin, finished, steps = np.inf, 0, []
        for n in range(N):
            memory, pad = model.encode(torch.tensor(source[n:n + 1]).long(), int(lengths[n]))
            fn = lambda ids, i: model.next_logits(memory, pad, torch.tensor(ids))  # noqa: E731
            seqs, scores, search = sequence_beam_search(fn, 1, V, beam, alpha, int(lengths[n]) + MAX_EXTRA, EOS)
            want = trim(seqs[0, 0, 1:], EOS)
            smallest_margin = min(smallest_margin, search.margin.smallest)
            finished += int(EOS in seqs[0, 0, 1:].tolist())
            steps.append(search.steps)
            if beam_ids[n] != want:
                failures.append(f"beam {beam} alpha {alpha}, sentence {n}: ours {beam_ids[n]}, reference {want}")
            if abs(beam_scores[n] - scores[0, 0]) > 1e-5 * max(1.0, abs(scores[0, 0])):
                failures.append(f"beam {beam} sentence {n}: score {beam_scores[n]:.8g}, reference {scores[0, 0]:.8g}")
            if bool(beam_finished[n]) != (EOS in seqs[0, 0, 1:].tolist()):
                failures.append(f"beam {beam} sentence {n}: finished {bool(beam_finished[n])}")
            if beam == 4:  # greedy decoding: the argmax loop on the same model
                ids = [0]
                for _ in range(int(lengths[n]) + MAX_EXTRA):
                    ids.append(int(np.argmax(model.next_logits(memory, pad, torch.tensor([ids]))[0])))
                    if ids[-1] == EOS:
                        break
                if greedy_ids[n] != trim(ids[1:], EOS):
                    failures.append(f"greedy, sentence {n}: ours {greedy_ids[n]}, reference {trim(ids[1:], EOS)}")
        differ = sum(beam_ids[n] != greedy_ids[n] for n in range(N))
        print(f"beam {beam}, alpha {alpha}: {N} sentences, {finished} ended with EOS, {differ} differ from greedy, "
              f"steps {steps}; smallest top-k margin {smallest_margin:.3g}")
        print("  ours:", beam_ids)

print(f"{trained - start:.1f} s to train, {time.time() - trained:.1f} s to compare")
if failures:
    print("FAIL:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("PASS")
