// Concatenation of two 2-D tensors along the last (feature) dimension, as torch.cat([a, b], 1)
// (NCF joins its GMF and MLP branches, and the user and item MLP embeddings, this way).
#pragma once

#include "scaletrain/backend/context.hpp"

namespace scaletrain::ops {

// a: (N, A); b: (N, B); y: (N, A + B) overwritten with [a | b] row by row.
void concat_features_forward(Context& ctx, const Tensor& a, const Tensor& b, Tensor& y);
// The split: dy: (N, A + B); da: (N, A) and db: (N, B) overwritten with its left and right parts.
void concat_features_backward(Context& ctx, const Tensor& dy, Tensor& da, Tensor& db);

}  // namespace scaletrain::ops
