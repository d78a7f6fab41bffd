// Max pooling and global average pooling on channels-last activations.
#pragma once

#include "scaletrain/backend/context.hpp"

namespace scaletrain::ops {

struct MaxPool2dParams {
  int kernel = 3;
  int stride = 2;
  int padding = 1;  // padded positions never win (PyTorch: padding is -inf)
};

// x: (N, H, W, C). Returns (N, OH, OW, C) with PyTorch's floor rounding.
Shape max_pool2d_output_shape(const MaxPool2dParams& p, const Shape& x);
// y: (N, OH, OW, C), overwritten.
void max_pool2d_forward(Context& ctx, const MaxPool2dParams& p, const Tensor& x, Tensor& y);
// Gradient goes to the first maximum of each window; dx: (N, H, W, C), overwritten.
void max_pool2d_backward(Context& ctx, const MaxPool2dParams& p, const Tensor& x, const Tensor& y, const Tensor& dy,
                         Tensor& dx);

// x: (N, H, W, C); y: (N, C) overwritten with the mean over H and W.
void global_avg_pool_forward(Context& ctx, const Tensor& x, Tensor& y);
// dy: (N, C); dx: (N, H, W, C) overwritten.
void global_avg_pool_backward(Context& ctx, const Tensor& dy, Tensor& dx);

}  // namespace scaletrain::ops
