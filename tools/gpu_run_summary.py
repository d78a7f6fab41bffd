#!/usr/bin/env python3
"""One run's report.json in a few lines, for the GPU check's logs (tools/bench_gpu_resnet50.sh,
tests/gpu/test_demo.sh): where a step's time goes (host phases, and the GPU's own time of forward,
backward and optimizer from CUDA events), the peak GPU memory, what cuDNN chose per
convolution (algorithm or graph-API engine, math type, workspace; how many shapes the graph API
ran and why others fell back) and, from a run with --op-times, the ops that take
the most of a step, so that a slow first GPU run says why.

  python3 tools/gpu_run_summary.py RUN_DIR/report.json
"""
import collections
import json
import sys


# The kinds of tools/bench_torch_resnet50_gpu.py's kernel table, by our op names.
OP_KINDS = ("convolution or GEMM", "batch norm", "pooling", "optimizer and scaler", "element-wise, casts and the rest")


def op_kind(op):
    if op.startswith(("conv2d", "linear", "batched_matmul")):
        return "convolution or GEMM"
    if op.startswith("batch_norm"):
        return "batch norm"
    if "pool" in op:
        return "pooling"
    if op.startswith(("sgd", "lars", "adam", "lazy_adam", "unscale")):
        return "optimizer and scaler"
    return "element-wise, casts and the rest"


def main(path):
    r = json.load(open(path))
    steps = max(int(r.get("steps") or 1), 1)
    st = r.get("step_time") or {}
    if st.get("median_p50_s") is not None:
        print(f"  step time: median {st['median_p50_s'] * 1e3:.1f} ms ({st.get('excluded', '')} excluded)")
    # Where a step's time goes without the warm-up step (report.json's step_split, rank mean).
    split = r.get("step_split") or {}
    if split:
        print("  host time per step after the first (ms): " +
              ", ".join(f"{k[:-2]} {v * 1e3:.1f}" for k, v in split.items() if isinstance(v, (int, float))))
    d = r.get("device") or {}
    gpu = d.get("phases") or {}
    if gpu:
        # per_step_after_first_s leaves the warm-up out; older reports have only the run's totals.
        def per_step(p):
            v = p.get("per_step_after_first_s")
            return v if v is not None else p.get("mean_s", 0) / steps
        print("  GPU time per step after the first (ms, CUDA events): " +
              ", ".join(f"{name} {per_step(p) * 1e3:.1f}" for name, p in gpu.items()))
    if d.get("peak_memory_bytes") is not None:
        in_use = d.get("peak_in_use_bytes")
        print(f"  peak GPU memory: {d['peak_memory_bytes'] / 2**20:.0f} MiB reserved" +
              (f", {in_use / 2**20:.0f} MiB in use (as PyTorch's max_memory_allocated)" if in_use is not None else "") +
              (f", {d['allocations_after_first_step']} cudaMalloc after the first step"
               if d.get("allocations_after_first_step") is not None else ""))
    algos = d.get("conv_algorithms") or []

    # The legacy API's algorithm, or the graph API's engine (--conv-algo graph | graph-search).
    def kernel(a):
        return f"engine {a['engine']}" if a.get("engine") is not None else f"algo {a['algo']}"

    count = collections.Counter((a["direction"], kernel(a), a["math"]) for a in algos)
    for (direction, what, math), n in sorted(count.items()):
        ws = max(a["workspace_bytes"] for a in algos if (a["direction"], kernel(a), a["math"]) == (direction, what, math))
        print(f"  cuDNN {direction}: {what} math {math}: {n} shape(s), workspace up to {ws / 2**20:.1f} MiB")
    # --conv-algo graph | graph-search: per direction, the shapes the graph API ran and those that
    # fell back to the legacy API (chosen_by "heuristic (graph API: why)"), with the commonest reasons.
    for direction in sorted({a["direction"] for a in algos}):
        mine = [a for a in algos if a["direction"] == direction]
        ran = [a for a in mine if (a.get("chosen_by") or "").startswith("graph")]
        fell_back = [a for a in mine if "graph API:" in (a.get("chosen_by") or "")]
        if not ran and not fell_back:
            continue
        reasons = collections.Counter(a["chosen_by"].split("graph API: ", 1)[1].rstrip(")") for a in fell_back)
        why = "; ".join(f"{n}x {r[:160]}" for r, n in reasons.most_common(2))
        print(f"  cuDNN {direction} graph API: ran {len(ran)} of {len(mine)} shape(s), {len(fell_back)} fell back"
              + (f" ({why})" if why else ""))
    # A search (--conv-algo search: cuDNN's; graph-search: ours over the graph API's engines): what
    # preferring deterministic kernels costs, shape by shape summed.
    searched = [a for a in algos if a.get("search_ms") is not None]
    for direction, kind in sorted({(a["direction"], "graph-search" if a["chosen_by"].startswith("graph") else "search")
                                   for a in searched}):
        mine = [a for a in searched if a["direction"] == direction and
                ("graph-search" if a["chosen_by"].startswith("graph") else "search") == kind]
        print(f"  cuDNN {direction} {kind}: {sum(a['search_ms'] for a in mine):.2f} ms chosen, "
              f"{sum(a['fastest_ms'] for a in mine):.2f} ms fastest of any determinism ({len(mine)} shapes, once each)")
    # --op-times: the ops that take the most of a step (rank 0's).
    ot = r.get("op_times")
    if ot:
        print(f"  op times per step ({ot['clock']}, {ot['steps']} steps after the first): "
              f"{ot['top_level_ms_per_step']:.2f} ms in ops")
        # By the kinds bench_torch_resnet50_gpu.py sorts PyTorch's kernels into, to read side by side
        # (the outermost ops only, so that no time counts twice).
        kinds = {}
        for o in ot["ops"]:
            if not o["nested"]:
                kinds[op_kind(o["op"])] = kinds.get(op_kind(o["op"]), 0.0) + o["ms_per_step"]
        total = sum(kinds.values()) or 1.0
        for kind in OP_KINDS:
            if kind in kinds:
                print(f"    {kind:<34} {kinds[kind]:9.3f} ms {100 * kinds[kind] / total:5.1f}%")
        for o in ot["ops"][:15]:
            nested = "  (inside other ops)" if o["nested"] else ""
            print(f"    {o['op']:<34} {o['calls_per_step']:7.1f} calls {o['ms_per_step']:9.3f} ms "
                  f"{100 * o['share']:5.1f}%{nested}")


if __name__ == "__main__":
    main(sys.argv[1])
