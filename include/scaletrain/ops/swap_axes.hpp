// The transpose attention needs between its token-major activations and per-head matrices:
// (A, B, C, D) -> (A, C, B, D). Multi-head attention projects tokens to (N, L, H, Dh) and runs
// its batched products on (N, H, L, Dh) (ops/batched_matmul.hpp), then merges the heads back.
// The op is its own inverse with B and C exchanged, so backward is the same op.
#pragma once

#include "scaletrain/backend/context.hpp"

namespace scaletrain::ops {

// x: (A, B, C, D); y: (A, C, B, D) overwritten, y[a][c][b][d] = x[a][b][c][d]; no overlap.
// Kernels: a oneDNN reorder on the CPU, own kernel on CUDA; both copies (the same bits).
void swap_middle_axes(Context& ctx, const Tensor& x, Tensor& y);

}  // namespace scaletrain::ops
