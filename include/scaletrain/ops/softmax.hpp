// Softmax over the last dimension of attention scores, with the Transformer's two masks: for
// scores x of shape (N, H, Lq, Lk) (batch, heads, queries, keys), row (n, h, i) is normalised
// over its valid keys j < valid(n, i), where
//
//   valid(n, i) = key_lengths[n]                    (padding mask: the source's or target's length)
//               = min(key_lengths[n], i + 1)        (with the decoder's causal mask as well)
//
// and its other entries get probability exactly 0 (PyTorch's -inf masks in nn.MultiheadAttention
// give the same; the reference TensorFlow model adds -1e9, which rounds to the same 0 in float32).
// Kernels: own loops on the CPU and on CUDA (cuDNN's softmax has no masks), the row's maximum
// subtracted first and the sum in double, so no row overflows and both devices agree to rounding.
#pragma once

#include "scaletrain/backend/context.hpp"

namespace scaletrain::ops {

struct SoftmaxMask {
  // Also mask key j > query i (the decoder's self-attention, where query i and key i are the same
  // position).
  bool causal = false;
};

// x: (N, H, Lq, Lk), Lk >= 1. key_lengths: (N) int32 on x's device, each in [1, Lk]. y: x's shape,
// overwritten (may not overlap x).
void masked_softmax_forward(Context& ctx, const SoftmaxMask& mask, const Tensor& x, const Tensor& key_lengths,
                            Tensor& y);
// dy: d(loss)/dy, y's shape. dx = y * (dy - sum_j dy_j y_j) per row: 0 at the masked entries.
// dx overwritten, overlapping neither y nor dy.
void masked_softmax_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx);

}  // namespace scaletrain::ops
