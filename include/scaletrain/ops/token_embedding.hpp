// The Transformer's input embedding after the lookup (MLPerf reference, embedding_layer.py and
// transformer.py): each token's row of the shared embedding is scaled by sqrt(width), zeroed
// where the token is padding (id 0; the decoder's start position is id 0 too, so it enters as
// the zero vector the reference shifts in), and the sinusoidal position signal is added:
//
//   y[n, l, :] = (ids[n, l] != 0 ? scale : 0) * x[n, l, :] + positions[l, :]
//
// The backward is the same scale and mask on dy (positions are not trained). Kernels: own loops
// on the CPU and on CUDA (one multiply and one add per element: the same bits on both).
#pragma once

#include "scaletrain/backend/context.hpp"

namespace scaletrain::ops {

// x: (N, L, D) looked-up rows; ids: (N, L) int32 on x's device; positions: (P, D) with P >= L;
// y: (N, L, D) overwritten, may alias x.
void token_embedding_forward(Context& ctx, const Tensor& x, const Tensor& ids, float scale, const Tensor& positions,
                             Tensor& y);
// dy: (N, L, D); dx: (N, L, D) overwritten, may alias dy.
void token_embedding_backward(Context& ctx, const Tensor& ids, float scale, const Tensor& dy, Tensor& dx);

}  // namespace scaletrain::ops
