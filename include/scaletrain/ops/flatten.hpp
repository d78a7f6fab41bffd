// Flatten in NCHW order: the classifier input of AlexNet (torchvision and Caffe) and of GoogLeNet's
// auxiliary heads. Their fully connected weights index the flattened features as c*H*W + h*W + w,
// as torch.flatten(x, 1) on an NCHW tensor; our activations are channels-last, so the flatten is a
// transpose. (Permuting the weight columns instead would make the weights in memory differ from
// those in a checkpoint and in the optimizer state.)
#pragma once

#include "scaletrain/backend/context.hpp"

namespace scaletrain::ops {

// x: (N, H, W, C); y: (N, C*H*W) overwritten, y[n][c*H*W + h*W + w] = x[n][h][w][c].
void flatten_chw_forward(Context& ctx, const Tensor& x, Tensor& y);
// The inverse: dy: (N, C*H*W); dx: (N, H, W, C) overwritten, dx[n][h][w][c] = dy[n][c*H*W + h*W + w].
// dx's shape gives H, W and C.
void flatten_chw_backward(Context& ctx, const Tensor& dy, Tensor& dx);

}  // namespace scaletrain::ops
