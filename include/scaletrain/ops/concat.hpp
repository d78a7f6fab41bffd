// Concatenation along the last dimension and its split: two 2-D tensors, as torch.cat([a, b], 1)
// (NCF joins its GMF and MLP branches, and the user and item MLP embeddings, this way), and any
// number of channels-last tensors, as torch.cat(xs, 1) on NCHW activations (the branches of an
// Inception block).
#pragma once

#include <vector>

#include "scaletrain/backend/context.hpp"

namespace scaletrain::ops {

// a: (N, A); b: (N, B); y: (N, A + B) overwritten with [a | b] row by row.
void concat_features_forward(Context& ctx, const Tensor& a, const Tensor& b, Tensor& y);
// The split: dy: (N, A + B); da: (N, A) and db: (N, B) overwritten with its left and right parts.
void concat_features_backward(Context& ctx, const Tensor& dy, Tensor& da, Tensor& db);

// xs: one or more tensors (..., C_i) with the same leading dims (any rank >= 1); y: (..., sum C_i)
// overwritten with xs[0]'s channels, then xs[1]'s, ... per row. y may not overlap any input.
void concat_channels_forward(Context& ctx, const std::vector<Tensor>& xs, Tensor& y);
// The split: dy: (..., sum C_i); each dxs[i]: (..., C_i), overwritten with its channels of dy. The
// dxs are handles to the caller's tensors (the vector is not resized); none may overlap dy.
void concat_channels_backward(Context& ctx, const Tensor& dy, const std::vector<Tensor>& dxs);

}  // namespace scaletrain::ops
