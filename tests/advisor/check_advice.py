#!/usr/bin/python3
"""Recompute every number of `scaletrain-advisor predict --json` from docs/scaling-model.md.

An independent re-derivation (issue 14): written from the formulas of docs/scaling-model.md only,
not from src/advisor/. Reads the machine file, the calibration file and the advisor's JSON
(format `scaletrain-advice`); recomputes each point of each series (compute, the all-reduce cost
of each bucket under each algorithm, the overlap with backward, the exposed communication, the
algorithm with the least exposed time, the data wait, the step, the throughput, the epoch time,
the speedup and the efficiency), the largest count that meets the efficiency threshold, and the
sharing of the node budget; prints every mismatch with its point and term; exits 1 on any.

usage: check_advice.py --machine M.json --calibration C.json --advice A.json
           [--batch B] [--gpus 1,8,64] [--scaling strong|weak|both] [--efficiency 0.7]
           [--budget-nodes 1] [--algorithm auto|ring|tree|hierarchical] [--hand-worked fixture|mlperf-v0.6]
(a machine file only, not --comm-bench; not --max-nodes or --gpus-per-node)

The options after --advice are the ones the advisor was run with (the defaults are the advisor's:
the calibration's default_batch, all series, 0.7, 1 node, auto); they say what the JSON must hold.
--hand-worked fixture|mlperf-v0.6 also asserts the hand-worked literals below: "fixture" for
tests/advisor/resnet50-v100-mixed-handcheck.json, "mlperf-v0.6" for the shipped
share/advisor/calibrations/resnet50-v100-mixed-mlperf-v0.6.json, each on
share/advisor/machines/dgx1-4xedr.json at its default batch of 208 and with the default options.

Tolerances: relative 1e-9 on every time, rate and ratio (the advisor writes 15 significant digits),
with an absolute floor of 1e-12 s for the terms that are differences and can be 0 (exposed comm,
data wait); counts and names exactly.

How the doc is read where it leaves room (each is also in the report to the maintainers):
  R1. One rank (P = 1) does no all-reduce: comm 0, exposed 0, algorithm "none". The doc does not
      say so; its tree formula would give 2·S/B_intra > 0 on one rank. ("none" is from
      include/scaletrain/advisor/scaling_model.hpp.)
  R2. B_min and "min B" are min(B_intra, B_inter); "max α" is max(α_intra, α_inter).
  R3. The hierarchical host-staging term 2·(S/L)/B_host is added only when host_copy_GBps > 0 and
      N > 1 ("on one node it is the ring").
  R4. "least exposed time" may tie (ring and hierarchical are the same formula on one node, and
      several algorithms can all be hidden, exposed 0): any algorithm within the tolerance of the
      least is accepted; comm_s must then be that algorithm's. The doc names no tie-break.
  R5. One algorithm per point, for all its buckets (not the cheapest per bucket).
  R6. The calibration's buckets are used as they are (bytes and ready_fraction); bucket_mb only
      says how they were planned.
  R7. Strong scaling: the per-GPU batch b·P0/P is not rounded (3.25 samples is kept as 3.25); the
      series keeps the points with b·P0/P >= 1 and ends at the first below 1.
  R8. "the largest node count that still meets an efficiency threshold" (intro) is read as the
      largest count of the series with efficiency >= threshold (the JSON gives it in GPUs and
      nodes; 0 if none), whether or not a smaller count failed the threshold.
  R9. Sharing: k = 1, 2, 4, ... (powers of two) with K/k a whole number of GPUs that is a divisor
      of G ("inside one node") or a multiple of G ("whole nodes"; a 6- or 3-GPU job inside an
      8-GPU node is not a choice, although --gpus 3 is accepted by the series); every job trains
      with the same global batch J (--job-batch; default b x G), so a job of K/k GPUs has
      J/(K/k) samples per GPU, and a split that would give a GPU less than one is left out.
      --algorithm applies to these jobs too (the doc says so since the review; a table that uses
      the least exposed time is still accepted with a note). vs_one_job = total / total(k = 1);
      "best" is a choice with the most samples/s (ties: any of them).
  R10. The default --gpus (not in the doc; from `predict --help`): 1, 2, 4 .. G, then 2, 4, 8 ..
      nodes below max_nodes, then max_nodes.
  R11. Units: latency_us · 1e-6 s, bandwidth_GBps · 1e9 bytes/s (the doc: "1e9 bytes/s").

Hand-worked points (fixture tests/advisor/resnet50-v100-mixed-handcheck.json on the DGX-1 file:
α_intra = 3.4 µs, B_intra = 100e9 B/s, α_inter = 9.6 µs, B_inter = 48e9 B/s, no host staging;
forward 0.004 + 0.00025·b, backward 0.006 + 0.0005·b, optimizer 0.003 s; buckets in backward
order S0 = 26,214,400 B at 0.3, S1 = 20,000,000 B at 0.75, S2 = 4,899,664 B at 1.0;
input 1230 samples/s per rank; 1,281,167 samples per epoch), batch b = 208:

  compute: forward = 0.004 + 0.052 = 0.056; backward = 0.006 + 0.104 = 0.110; + 0.003
           = 0.169 s at every weak point. Ready times r = 0.3·0.110 = 0.033, 0.75·0.110 = 0.0825,
           0.110 s.
  W1, the 1-GPU weak point (P0): no all-reduce (R1); b / input = 208/1230 = 0.169105691056911 s
           > 0.169, so data wait = 0.000105691056911 s, step = 0.169105691056911 s,
           throughput = 208 / step = 1230 samples/s exactly, epoch = 1281167/1230 = 1041.599187 s.
  W8, the 8-GPU weak point (N = 1, L = 8):
           ring(8) = 2·7·3.4e-6 + (2·7/8)·S/100e9 = 47.6e-6 + 1.75·S/1e11:
             c0 = 47.6e-6 + 458.752e-6   = 506.352e-6 s
             c1 = 47.6e-6 + 350e-6       = 397.6e-6 s
             c2 = 47.6e-6 + 85.74412e-6  = 133.34412e-6 s
           tree(N = 1) = 2·7·3.4e-6 + 2·S/100e9 is larger for every bucket; hierarchical = ring.
           comm = 506.352 + 397.6 + 133.34412 = 1037.29612e-6 s
           end0 = 0.033 + 0.000506352 = 0.033506352; end1 = max(0.0825, end0) + 0.0003976 =
           0.0828976; end2 = max(0.110, end1) + 0.00013334412 = 0.11013334412;
           exposed = 0.11013334412 − 0.110 = 0.00013334412 s (the last bucket's own cost)
           compute + exposed = 0.16913334412 > 208/1230 = 0.169105691..., so data wait = 0,
           step = 0.16913334412 s; throughput = 8·208/step = 1664/0.16913334412 = 9838.39117388581;
           epoch = 1281167/9838.39117388581 = 130.221189354680 s;
           speedup = 9838.39117388581/1230 = 7.99869201128928; efficiency = /8 = 0.999836501411160.
  W16, the 16-GPU weak point (N = 2, L = 8), the last bucket S2 = 4,899,664 B:
           ring(16, 9.6e-6, 48e9)  = 2·15·9.6e-6 + (30/16)·S2/48e9 = 288e-6 + 191.393125e-6
                                   = 479.393125e-6 s
           tree = 2·7·3.4e-6 + 2·⌈log2 2⌉·9.6e-6 + 2·S2/48e9 = 47.6e-6 + 19.2e-6 + 204.152667e-6
                                   = 270.952667e-6 s
           hierarchical = ring(8, 3.4e-6, 100e9) + 2·1·9.6e-6 + (2·1/2)·S2/48e9
                        = 133.34412e-6 + 19.2e-6 + 102.0763333e-6 = 254.6204533e-6 s  (least)
           (all three hide S0 and S1 behind backward, so exposed = the last bucket's cost:
           hierarchical's 0.000254620453333 s; its comm = the three hierarchical costs,
           0.00215977245333 s); step = 0.169254620453333 s; throughput = 3328/step =
           19662.6833056979.
  W640, the 80-node weak point (N = 80, L = 8, P = 640), ⌈log2 80⌉ = 7:
           tree = 2·7·3.4e-6 + 2·7·9.6e-6 + 2·S/48e9 = 182e-6 + S/24e9:
             c0 = 182e-6 + 1092.266667e-6 = 1274.266667e-6 s
             c1 = 182e-6 +  833.333333e-6 = 1015.333333e-6 s
             c2 = 182e-6 +  204.152667e-6 =  386.152667e-6 s
           ring(640, 9.6e-6, 48e9) = 2·639·9.6e-6 + ... >= 12268.8e-6 s per bucket (latency alone);
           hierarchical c2 = 133.34412e-6 + 2·79·9.6e-6 + (2·79/80)·S2/48e9
                           = 133.34412e-6 + 1516.8e-6 + 201.6007583e-6 = 1851.744878e-6 s.
           Tree: end0 = 0.033 + 0.001274266667 = 0.034274266667 (< 0.0825);
           end1 = 0.0825 + 0.001015333333 = 0.083515333333 (< 0.110);
           end2 = 0.110 + 0.000386152667; exposed = 0.000386152666667 s (least: tree).
           comm = 1274.266667 + 1015.333333 + 386.152667 = 2675.752667e-6 s
           step = 0.169 + 0.000386152666667 = 0.169386152666667 s (no data wait);
           throughput = 640·208/step = 133120/0.169386152666667 = 785896.591334508;
           epoch = 1281167/785896.591334508 = 1.63019793459657 s;
           speedup = 785896.591334508/1230 = 638.940318158137; efficiency = /640 = 0.998344247122089.
  S64, the 64-GPU strong point (global batch 208, b = 208/64 = 3.25, N = 8): forward = 0.004 +
           0.0008125 = 0.0048125; backward = 0.006 + 0.001625 = 0.007625; compute = 0.0154375 s.
           Tree (as at W640 with ⌈log2 8⌉ = 3: 2·7·3.4e-6 + 2·3·9.6e-6 = 105.2e-6 + S/24e9):
             c0 = 1197.466667e-6, c1 = 938.533333e-6, c2 = 309.352667e-6 s; r = 0.0022875,
           0.00571875, 0.007625: end0 = 0.003484966667 ; end1 = max(0.00571875, end0) +
           0.000938533333 = 0.006657283333; end2 = max(0.007625, end1) + 0.000309352667 =
           0.007934352667; exposed = 0.000309352666667 s; data wait: 3.25/1230 = 0.00264 < step, 0;
           step = 0.015746852666667 s; throughput = 208/step = 13209.0993...
           speedup = 13209.0993/1230 = 10.7391; efficiency = /64 = 0.167799.
  Sharing 2 nodes (K = 16), every job at the global batch J = 208·8 = 1664:
           k = 1: 16 GPUs at 104: compute = 0.004 + 0.026 + 0.006 + 0.052 + 0.003 = 0.091 s; the
             first two buckets are done before backward (0.058 s) ends, the last one's
             hierarchical all-reduce over 2 nodes (254.62045333e-6 s, above) is exposed;
             104/1230 = 0.08455 s of input is hidden: step = 0.09125462045333 s,
             throughput = 1664/step = 18234.6931227548;
           k = 2: 2·throughput(8 at 208) = 2·9838.39117388581 = 19676.7823477716;
           k = 4, 8, 16 (4 GPUs at 416, 2 at 832, 1 at 1664): each rank's input (1230 samples/s)
             is slower than its compute and exposed all-reduce, so each job does 1230 samples/s
             per GPU: 4·4920 = 8·2460 = 16·1230 = 19680. The most: 19680, 1.07926x one job.

Hand-worked points for the shipped share/advisor/calibrations/resnet50-v100-mixed-mlperf-v0.6.json
on the same DGX-1 file (--hand-worked mlperf-v0.6), b = 208. Its curves: forward 1/600 s +
0.000228737285185185·b, backward 1/300 s + 0.000457474570370370·b, optimizer 0.000567934044444 s;
buckets S0 = 26,159,056 B ready at 0.131960465757471, S1 = 24,955,008 B at 1.0; no input rate
(no data wait):
  compute: forward = 0.001666667 + 0.047577355 = 0.049244022; backward = 0.003333333 + 0.095154711
           = 0.098488044; compute = 0.049244022 + 0.098488044 + 0.000567934 = 0.1483 s (the
           published 148.3 ms per step, by construction). r0 = 0.131960466·0.098488044 = 0.012996528.
  V1, 1 GPU: step = 0.1483 s, throughput = 208/0.1483 = 1402.56237356709, epoch = 913.447433173 s.
  V8, 8 GPUs (N = 1): ring(8): c0 = 47.6e-6 + 1.75·26159056/1e11 = 47.6e-6 + 457.78348e-6 =
           505.38348e-6; c1 = 47.6e-6 + 1.75·24955008/1e11 = 47.6e-6 + 436.71264e-6 = 484.31264e-6.
           end0 = 0.012996528 + 0.000505383 = 0.013501912 < backward, so end1 = backward + c1 and
           exposed = c1 = 484.31264e-6 s; comm = 989.69612e-6 s; step = 0.1483 + 0.00048431264 =
           0.14878431264 s (the doc's validation table: 148.8 ms); throughput = 1664/step =
           11183.9747784851; speedup = 11183.9747784851/1402.56237356709 = 7.97395894062182;
           efficiency = 0.996744867577727.
  V640, 80 nodes: tree = 182e-6 + S/24e9 (as at W640): c0 = 182e-6 + 1089.960667e-6 =
           1271.960667e-6; c1 = 182e-6 + 1039.792e-6 = 1221.792e-6. end0 = 0.012996528 + 0.001271961
           = 0.014268489 < backward: exposed = c1 = 1221.792e-6 s (hierarchical's c1 =
           484.31264e-6 + 1516.8e-6 + 1.975·24955008/48e9 = 3027.907240e-6; ring's latency alone
           12268.8e-6). step = 0.1483 + 0.001221792 = 0.149521792 s; throughput = 133120/step =
           890305.006510356; speedup = 634.770348391758; efficiency = 0.1483/0.149521792 =
           0.991828669362122; epoch = 1281167/890305.006510356 = 1.43902032520481 s.
"""

import argparse
import json
import math
import sys

REL = 1e-9
ABS_S = 1e-12
ALGORITHMS = ("ring", "tree", "hierarchical")

mismatches = []


def bad(where, term, got, want, note=""):
    mismatches.append(f"{where}: {term}: got {got!r}, expected {want!r}{(' (' + note + ')') if note else ''}")


def close(a, b, abs_floor=0.0):
    return abs(a - b) <= REL * max(abs(a), abs(b)) + abs_floor


def check_num(where, term, got, want, abs_floor=0.0):
    if not isinstance(got, (int, float)) or isinstance(got, bool) or not math.isfinite(got):
        bad(where, term, got, want, "not a finite number")
    elif not close(got, want, abs_floor):
        diff = abs(got - want)
        bad(where, term, got, want, f"relative difference {diff / abs(want):.3g}" if want else f"difference {diff:.3g}")


def check_eq(where, term, got, want):
    if got != want:
        bad(where, term, got, want)


# --- the machine and the calibration, from their files (docs/scaling-model.md, "Files") ---------

class Machine:
    def __init__(self, j, path):
        if j.get("format") != "scaletrain-machine":
            sys.exit(f"check_advice.py: {path} is not a scaletrain-machine file")
        self.G = int(j["gpus_per_node"])
        self.max_nodes = int(j["max_nodes"])
        self.a_intra = j["intra_node"]["latency_us"] * 1e-6  # R11
        self.b_intra = j["intra_node"]["bandwidth_GBps"] * 1e9
        self.a_inter = j["inter_node"]["latency_us"] * 1e-6
        self.b_inter = j["inter_node"]["bandwidth_GBps"] * 1e9
        self.b_host = j.get("host_copy_GBps", 0) * 1e9
        self.raw = j


class Calibration:
    def __init__(self, j, path):
        if j.get("format") != "scaletrain-calibration":
            sys.exit(f"check_advice.py: {path} is not a scaletrain-calibration file")
        self.f0, self.f1 = j["forward"]["fixed_s"], j["forward"]["per_sample_s"]
        self.g0, self.g1 = j["backward"]["fixed_s"], j["backward"]["per_sample_s"]
        self.opt = j["optimizer_s"]
        self.bucket_bytes = [float(b["bytes"]) for b in j["buckets"]]  # R6
        self.ready = [b["ready_fraction"] for b in j["buckets"]]
        self.input_rate = j.get("input_samples_per_s", 0)
        self.default_batch = j["default_batch"]
        self.train_samples = j["train_samples"]
        assert sum(self.bucket_bytes) == j["gradient_bytes"], f"{path}: buckets do not sum to gradient_bytes"
        self.raw = j


# --- the model, term by term ---------------------------------------------------------------------

def ring(n, alpha, bw, s):
    """ring(n, α, B, S) = 2(n−1)·α + 2(n−1)/n · S/B"""
    return 2 * (n - 1) * alpha + 2 * (n - 1) / n * s / bw


def half_ring(n, alpha, bw, s):
    """½ring: a reduce-scatter or an all-gather, half the ring's steps."""
    return (n - 1) * alpha + (n - 1) / n * s / bw


def allreduce(alg, m, N, L, s):
    """The cost of one bucket of s bytes on N nodes of L ranks (the doc's table)."""
    if alg == "ring":
        if N == 1:
            return ring(L, m.a_intra, m.b_intra, s)
        return ring(N * L, max(m.a_intra, m.a_inter), min(m.b_intra, m.b_inter), s)  # R2
    if alg == "tree":
        b = m.b_intra if N == 1 else min(m.b_intra, m.b_inter)  # R2
        return 2 * (L - 1) * m.a_intra + 2 * math.ceil(math.log2(N)) * m.a_inter + 2 * s / b
    if alg == "hierarchical":
        if N == 1:
            return ring(L, m.a_intra, m.b_intra, s)  # "On one node it is the ring."
        cost = (2 * half_ring(L, m.a_intra, m.b_intra, s) + 2 * (N - 1) * m.a_inter
                + 2 * (N - 1) / N * s / m.b_inter)
        if m.b_host > 0:  # R3
            cost += 2 * (s / L) / m.b_host
        return cost
    raise ValueError(alg)


def overlap(backward, ready_s, costs):
    """end_0 = r_0 + c_0, end_k = max(r_k, end_{k−1}) + c_k; exposed = max(0, end_last − backward)."""
    end = None
    for r, c in zip(ready_s, costs):
        end = r + c if end is None else max(r, end) + c
    return sum(costs), max(0.0, end - backward)


def layout(m, P):
    """P ranks = N nodes × L ranks per node, L = min(P, G); beyond one node only whole nodes."""
    L = min(P, m.G)
    if P > m.G and P % m.G:
        raise ValueError(f"{P} GPUs is not a whole number of {m.G}-GPU nodes")
    return P // L, L


def predict(c, m, P, b, forced=None):
    """Everything of one point but speedup and efficiency; 'candidates': the algorithms tied least."""
    N, L = layout(m, P)
    fwd, bwd = c.f0 + c.f1 * b, c.g0 + c.g1 * b
    compute = fwd + bwd + c.opt
    per_alg = {}
    if P == 1:  # R1
        per_alg["none"] = (0.0, 0.0)
        candidates = ["none"]
    else:
        ready_s = [f * bwd for f in c.ready]
        for alg in ALGORITHMS:
            per_alg[alg] = overlap(bwd, ready_s, [allreduce(alg, m, N, L, s) for s in c.bucket_bytes])
        if forced:
            candidates = [forced]
        else:  # the least exposed time; R4: ties within the tolerance all count
            least = min(e for _, e in per_alg.values())
            candidates = [a for a in ALGORITHMS if close(per_alg[a][1], least, ABS_S)]
    out = []
    for alg in candidates:
        comm, exposed = per_alg[alg]
        wait = max(0.0, b / c.input_rate - (compute + exposed)) if c.input_rate > 0 else 0.0
        step = compute + exposed + wait
        thr = P * b / step
        out.append(dict(gpus=P, nodes=N, ranks_per_node=L, per_rank_batch=b, global_batch=P * b, algorithm=alg,
                        forward_s=fwd, backward_s=bwd, optimizer_s=c.opt, compute_s=compute, comm_s=comm,
                        exposed_comm_s=exposed, data_wait_s=wait, step_s=step, samples_per_s=thr,
                        epoch_s=c.train_samples / thr))
    return out  # one entry per tied algorithm; they differ in algorithm and comm_s only


def default_gpus(m):
    """R10: 1, 2, 4 .. G, then 2, 4, 8 .. nodes below max_nodes, then max_nodes."""
    g, out = 1, []
    while g < m.G:
        out.append(g)
        g *= 2
    out.append(m.G)
    n = 2
    while n < m.max_nodes:
        out.append(n * m.G)
        n *= 2
    if m.max_nodes > 1:
        out.append(m.max_nodes * m.G)
    return out


def series_counts(kind, gpus, b):
    if kind == "weak":
        return [(P, float(b)) for P in gpus]
    out = []  # strong: the global batch b·P0 split over P; ends before a GPU gets < 1 sample (R7)
    for P in gpus:
        per = b * gpus[0] / P
        if per < 1:
            break
        out.append((P, per))
    return out


POINT_NUMBERS = ("per_rank_batch", "global_batch", "forward_s", "backward_s", "optimizer_s", "compute_s",
                 "comm_s", "exposed_comm_s", "data_wait_s", "step_s", "samples_per_s", "epoch_s")
FLOORED = {"exposed_comm_s", "data_wait_s", "comm_s"}


def check_point(where, got, options):
    """Compare one advisor point with the expectation for its algorithm (one of the tied least)."""
    want = next((w for w in options if w["algorithm"] == got.get("algorithm")), None)
    if want is None:
        bad(where, "algorithm", got.get("algorithm"), " or ".join(w["algorithm"] for w in options),
            "least exposed time" if len(options) >= 1 and options[0]["gpus"] > 1 else "one rank")
        want = options[0]
    for key in ("gpus", "nodes", "ranks_per_node"):
        check_eq(where, key, got.get(key), want[key])
    for key in POINT_NUMBERS:
        check_num(where, key, got.get(key), want[key], ABS_S if key in FLOORED else 0.0)
    return want


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--machine", required=True)
    ap.add_argument("--calibration", required=True)
    ap.add_argument("--advice", required=True)
    ap.add_argument("--batch", type=float, default=0)
    ap.add_argument("--gpus", default="")
    ap.add_argument("--scaling", default="both", choices=("strong", "weak", "both"))
    ap.add_argument("--efficiency", type=float, default=0.7)
    ap.add_argument("--budget-nodes", type=int, default=1)
    ap.add_argument("--job-batch", type=float, default=0)
    ap.add_argument("--algorithm", default="auto", choices=("auto",) + ALGORITHMS)
    ap.add_argument("--hand-worked", choices=("fixture", "mlperf-v0.6"))
    a = ap.parse_args()

    m = Machine(json.load(open(a.machine)), a.machine)
    c = Calibration(json.load(open(a.calibration)), a.calibration)
    adv = json.load(open(a.advice))
    forced = None if a.algorithm == "auto" else a.algorithm
    b = a.batch if a.batch > 0 else c.default_batch
    gpus = [int(x) for x in a.gpus.split(",")] if a.gpus else default_gpus(m)

    check_eq("advice", "format", adv.get("format"), "scaletrain-advice")
    check_eq("advice", "version", adv.get("version"), 1)
    check_num("advice", "batch_per_gpu", adv.get("batch_per_gpu"), b)
    check_num("advice", "efficiency_threshold", adv.get("efficiency_threshold"), a.efficiency)
    am = adv.get("machine", {})
    for key in ("gpus_per_node", "max_nodes", "host_copy_GBps"):
        check_eq("advice.machine", key, am.get(key), m.raw.get(key, 0))
    for level in ("intra_node", "inter_node"):
        check_eq(f"advice.machine.{level}", "value", am.get(level), m.raw[level])
    for key in ("model", "device", "precision"):
        check_eq("advice.calibration", key, adv.get("calibration", {}).get(key), c.raw[key])

    kinds = ["weak", "strong"] if a.scaling == "both" else [a.scaling]
    series = adv.get("series", {})
    check_eq("advice", "series", sorted(series), sorted(kinds))
    computed = {}
    for kind in kinds:
        counts = series_counts(kind, gpus, b)
        got = series.get(kind, [])
        check_eq(kind, "points (GPU counts)", [p.get("gpus") for p in got], [P for P, _ in counts])
        pts = []
        for (P, per), g in zip(counts, got):
            where = f"{kind} {P} GPUs"
            pts.append(check_point(where, g, predict(c, m, P, per, forced)))
        # speedup(P) = throughput(P) / throughput(P0); efficiency = speedup / (P / P0). The P0 used
        # is the advisor's chosen one among ties (they have the same throughput, R4).
        for p, g in zip(pts, got):
            p["speedup"] = p["samples_per_s"] / pts[0]["samples_per_s"]
            p["efficiency"] = p["speedup"] / (p["gpus"] / pts[0]["gpus"])
            where = f"{kind} {p['gpus']} GPUs"
            check_num(where, "speedup", g.get("speedup"), p["speedup"])
            check_num(where, "efficiency", g.get("efficiency"), p["efficiency"])
        computed[kind] = pts

        # R8: the largest count with efficiency >= threshold; a count within the tolerance of
        # the threshold may go either way.
        le = adv.get("largest_efficient", {}).get(kind, {})
        sure = [p["gpus"] for p in pts if p["efficiency"] >= a.efficiency and not close(p["efficiency"], a.efficiency)]
        maybe = [p["gpus"] for p in pts if close(p["efficiency"], a.efficiency)]
        allowed = {max(sure + maybe, default=0), max(sure, default=0)}
        if le.get("gpus") not in allowed:
            bad(f"largest_efficient.{kind}", "gpus", le.get("gpus"), " or ".join(map(str, sorted(allowed))))
        elif le.get("gpus"):
            check_eq(f"largest_efficient.{kind}", "nodes", le.get("nodes"), layout(m, le["gpus"])[0])

    # Sharing a budget of K GPUs (R9).
    K = a.budget_nodes * m.G
    J = a.job_batch if a.job_batch > 0 else b * m.G
    sh = adv.get("sharing", {})
    check_num("sharing", "job_batch", sh.get("job_batch"), J)
    check_eq("sharing", "budget_gpus", sh.get("budget_gpus"), K)
    def sharing_choices(alg):
        out, k = [], 1
        while k <= K:
            if K % k == 0:
                size = K // k
                per_gpu = J / size
                if (m.G % size == 0 or size % m.G == 0) and per_gpu >= 1.0:
                    # Tied algorithms have the same throughput (R4): take the first.
                    out.append((k, size, k * predict(c, m, size, per_gpu, alg)[0]["samples_per_s"]))
            k *= 2
        return out

    choices = sh.get("choices", [])
    want = sharing_choices(forced)
    if forced:
        # R9: the doc does not say whether --algorithm also applies to the jobs of the sharing
        # table. Either reading is accepted, provided the whole table follows one of them.
        auto = sharing_choices(None)
        fits = lambda w: all(close(x.get("samples_per_s", -1), t) for (_, _, t), x in zip(w, choices))
        if not fits(want) and fits(auto):
            print(f"note: {a.advice}: the sharing table uses the least-exposed algorithm, not --algorithm "
                  f"{forced} (the doc does not say which; accepted)")
            want = auto
    check_eq("sharing", "choices (jobs x GPUs)", [(x.get("jobs"), x.get("gpus_per_job")) for x in choices],
             [(k, size) for k, size, _ in want])
    for (k, size, total), x in zip(want, choices):
        where = f"sharing {k} jobs of {size} GPUs"
        check_num(where, "samples_per_s", x.get("samples_per_s"), total)
        check_num(where, "vs_one_job", x.get("vs_one_job"), total / want[0][2])
    if want:
        most = max(t for _, _, t in want)
        best = sh.get("best", {})
        tied = [(k, size) for k, size, t in want if close(t, most)]
        if (best.get("jobs"), best.get("gpus_per_job")) not in tied:
            bad("sharing.best", "jobs x GPUs", (best.get("jobs"), best.get("gpus_per_job")), " or ".join(map(str, tied)))
        check_num("sharing.best", "samples_per_s", best.get("samples_per_s"), most)
        check_num("sharing.best", "vs_one_job", best.get("vs_one_job"), most / want[0][2])

    if a.hand_worked:
        hand_worked(a.hand_worked, c, m, b, adv, computed)

    npts = sum(len(v) for v in computed.values())
    if mismatches:
        print(f"check_advice.py: {len(mismatches)} mismatch(es) in {a.advice}:", file=sys.stderr)
        for line in mismatches:
            print("  " + line, file=sys.stderr)
        return 1
    print(f"ok: {a.advice}: {npts} points of {', '.join(kinds)}, largest_efficient and {len(want)} sharing "
          f"choices recomputed from docs/scaling-model.md{' (and the hand-worked points)' if a.hand_worked else ''}")
    return 0


# --- the hand-worked points of the docstring, as literals -----------------------------------------

FIXTURE_POINTS = {  # (series, GPUs): {term: value worked by hand above}
    ("weak", 1): dict(algorithm="none", compute_s=0.169, comm_s=0.0, exposed_comm_s=0.0,
                      data_wait_s=208 / 1230 - 0.169, step_s=208 / 1230, samples_per_s=1230.0,
                      epoch_s=1281167 / 1230, speedup=1.0, efficiency=1.0),
    ("weak", 8): dict(algorithm="ring", nodes=1, compute_s=0.169, comm_s=1037.29612e-6,
                      exposed_comm_s=133.34412e-6, data_wait_s=0.0, step_s=0.16913334412,
                      samples_per_s=9838.39117388581, epoch_s=130.221189354680,
                      speedup=7.99869201128928, efficiency=0.999836501411160),
    ("weak", 16): dict(algorithm="hierarchical", nodes=2, comm_s=0.00215977245333333,
                       exposed_comm_s=254.6204533333e-6, data_wait_s=0.0, step_s=0.169254620453333,
                       samples_per_s=19662.6833056979),
    ("weak", 640): dict(algorithm="tree", nodes=80, ranks_per_node=8, compute_s=0.169,
                        comm_s=2675.752666666667e-6, exposed_comm_s=386.1526666666667e-6, data_wait_s=0.0,
                        step_s=0.169386152666667, samples_per_s=785896.591334508, epoch_s=1.63019793459657,
                        speedup=638.940318158137, efficiency=0.998344247122089),
    ("strong", 64): dict(algorithm="tree", nodes=8, per_rank_batch=3.25, global_batch=208.0,
                         forward_s=0.0048125, backward_s=0.007625, compute_s=0.0154375,
                         comm_s=(1197.466666666667 + 938.5333333333333 + 309.3526666666667) * 1e-6,
                         exposed_comm_s=309.3526666666667e-6, data_wait_s=0.0, step_s=0.0157468526666667,
                         samples_per_s=208 / 0.0157468526666667, speedup=208 / 0.0157468526666667 / 1230,
                         efficiency=208 / 0.0157468526666667 / 1230 / 64),
}
FIXTURE_SHARING = [(1, 16, 18234.6931227548), (2, 8, 19676.7823477716), (4, 4, 19680.0), (8, 2, 19680.0),
                (16, 1, 19680.0)]
# Single bucket costs worked above: (algorithm, N, L, bytes) -> seconds.
FIXTURE_COSTS = {("ring", 1, 8, 26214400): 506.352e-6, ("ring", 1, 8, 20000000): 397.6e-6,
              ("ring", 1, 8, 4899664): 133.34412e-6, ("ring", 2, 8, 4899664): 479.393125e-6,
              ("tree", 2, 8, 4899664): 270.9526666666667e-6, ("hierarchical", 2, 8, 4899664): 254.6204533333333e-6,
              ("tree", 80, 8, 26214400): 1274.266666666667e-6, ("tree", 80, 8, 20000000): 1015.333333333333e-6,
              ("tree", 80, 8, 4899664): 386.1526666666667e-6, ("hierarchical", 80, 8, 4899664): 1851.744878333333e-6,
              ("tree", 8, 8, 4899664): 309.3526666666667e-6}


V06_POINTS = {
    ("weak", 1): dict(algorithm="none", compute_s=0.1483, comm_s=0.0, exposed_comm_s=0.0, data_wait_s=0.0,
                      step_s=0.1483, samples_per_s=1402.56237356709, epoch_s=913.447433173077),
    ("weak", 8): dict(algorithm="ring", forward_s=0.0492440219851852, backward_s=0.0984880439703704,
                      compute_s=0.1483, comm_s=989.69612e-6, exposed_comm_s=484.31264e-6, data_wait_s=0.0,
                      step_s=0.14878431264, samples_per_s=11183.9747784851, speedup=7.97395894062182,
                      efficiency=7.97395894062182 / 8),
    ("weak", 640): dict(algorithm="tree", nodes=80, compute_s=0.1483,
                        comm_s=(1271.960666666667 + 1221.792) * 1e-6, exposed_comm_s=1221.792e-6,
                        data_wait_s=0.0, step_s=0.149521792, samples_per_s=890305.006510356,
                        speedup=634.770348391758, efficiency=0.991828669362122, epoch_s=1.43902032520481),
}
V06_COSTS = {("ring", 1, 8, 26159056): 505.38348e-6, ("ring", 1, 8, 24955008): 484.31264e-6,
             ("tree", 80, 8, 26159056): 1271.960666666667e-6, ("tree", 80, 8, 24955008): 1221.792e-6,
             ("hierarchical", 80, 8, 24955008): 3027.90724e-6}

HAND_SETS = {
    # name: (the inputs the literals assume, bucket costs, points, largest_efficient, sharing at 2 nodes)
    "fixture": ((0.004, 0.00025, 0.006, 0.0005, 0.003, [26214400.0, 20000000.0, 4899664.0], [0.3, 0.75, 1.0],
                 1230, 1281167, 208), FIXTURE_COSTS, FIXTURE_POINTS, {"weak": 640, "strong": 4}, FIXTURE_SHARING),
    "mlperf-v0.6": ((1 / 600, 0.000228737285185185, 1 / 300, 0.000457474570370370, 0.000567934044444444,
                     [26159056.0, 24955008.0], [0.131960465757471, 1.0], 0, 1281167, 208),
                    V06_COSTS, V06_POINTS, None, None),
}


def hand_worked(which, c, m, b, adv, computed):
    inputs, costs, points, largest, sharing = HAND_SETS[which]
    # The literals hold for those inputs only: say so if the calibration, machine or batch changed.
    got = (c.f0, c.f1, c.g0, c.g1, c.opt, c.bucket_bytes, c.ready, c.input_rate, c.train_samples, b,
           m.G, m.a_intra, m.b_intra, m.a_inter, m.b_inter, m.b_host)
    expect = inputs + (8, 3.4e-6, 100e9, 9.6e-6, 48e9, 0.0)

    def same(x, y):
        if isinstance(x, list):
            return len(x) == len(y) and all(same(u, v) for u, v in zip(x, y))
        return x == y or close(x, y)

    if not all(same(x, y) for x, y in zip(got, expect)):
        sys.exit(f"check_advice.py --hand-worked {which}: the calibration, machine or batch are not the ones the "
                 f"hand-worked literals assume: {got}")
    for (alg, N, L, s), want in costs.items():
        check_num(f"hand-worked {alg} on {N}x{L}, {s} B", "bucket cost (this script's formula)",
                  allreduce(alg, m, N, L, s), want)
    for (kind, P), terms in points.items():
        adv_pt = next((p for p in adv["series"].get(kind, []) if p["gpus"] == P), None)
        mine = next((p for p in computed.get(kind, []) if p["gpus"] == P), None)
        if adv_pt is None or mine is None:
            bad(f"hand-worked {kind} {P} GPUs", "point", None, "present")
            continue
        for term, want in terms.items():
            for who, pt in (("advisor", adv_pt), ("this script", mine)):
                where = f"hand-worked {kind} {P} GPUs ({who})"
                if isinstance(want, str) or isinstance(want, int) and not isinstance(want, bool):
                    check_eq(where, term, pt.get(term), want)
                else:
                    check_num(where, term, pt.get(term), want, ABS_S)
    for kind, gpus in (largest or {}).items():
        check_eq(f"hand-worked largest_efficient.{kind}", "gpus", adv.get("largest_efficient", {}).get(kind, {}).get("gpus"),
                 gpus)
    choices = adv.get("sharing", {}).get("choices", [])
    if sharing and adv.get("sharing", {}).get("budget_gpus") == 16:
        for (k, size, total), x in zip(sharing, choices):
            check_eq(f"hand-worked sharing {k} jobs", "gpus_per_job", x.get("gpus_per_job"), size)
            check_num(f"hand-worked sharing {k} jobs", "samples_per_s", x.get("samples_per_s"), total)


if __name__ == "__main__":
    sys.exit(main())
