// Embedding lookup, as PyTorch's nn.Embedding (no max_norm, no padding_idx, dense gradient):
// out[n, :] = table[index[n], :]. NCF's user and item factors are the tables; the data layer
// hands out int32 ids, so indices are int32 (2^31 rows is far beyond any table we train).
#pragma once

#include "scaletrain/backend/context.hpp"

namespace scaletrain::ops {

// table: (V, D) f32; indices: (N) i32, each in [0, V); out: (N, D) f32, overwritten.
// An index outside [0, V) throws, naming the index, its position and V.
void embedding_forward(Context& ctx, const Tensor& table, const Tensor& indices, Tensor& out);
// dout: (N, D); dtable: (V, D), overwritten: zero for rows no index names, and for every other
// row the sum of dout over the positions that name it, added in position order (so repeated
// indices sum, and the result is the same bits for any thread count).
void embedding_backward(Context& ctx, const Tensor& indices, const Tensor& dout, Tensor& dtable);

}  // namespace scaletrain::ops
