// Max, average, adaptive average and global average pooling on channels-last activations, with
// PyTorch's semantics (torch.nn.functional.max_pool2d, avg_pool2d, adaptive_avg_pool2d).
#pragma once

#include "scaletrain/backend/context.hpp"

namespace scaletrain::ops {

// Square windows only: every model here pools with square windows.
struct MaxPool2dParams {
  int kernel = 3;
  int stride = 2;
  int padding = 1;         // padded positions never win (PyTorch: padding is -inf)
  bool ceil_mode = false;  // PyTorch's ceil_mode: round the output size up (see max_pool2d_output_shape)
};

// x: (N, H, W, C). Returns (N, OH, OW, C) with OH = floor((H + 2p - k) / s) + 1, or with ceil_mode
// ceil(...) + 1, less one where the last window would start beyond the input and its left padding
// ((OH - 1) * s >= H + p), as PyTorch. The same for W.
Shape max_pool2d_output_shape(const MaxPool2dParams& p, const Shape& x);
// y: (N, OH, OW, C), overwritten.
void max_pool2d_forward(Context& ctx, const MaxPool2dParams& p, const Tensor& x, Tensor& y);
// Gradient goes to the first maximum of each window; dx: (N, H, W, C), overwritten.
void max_pool2d_backward(Context& ctx, const MaxPool2dParams& p, const Tensor& x, const Tensor& y, const Tensor& dy,
                         Tensor& dx);

// PyTorch AvgPool2d(kernel, stride, padding, ceil_mode, count_include_pad), square windows. The
// defaults are Inception's branch pool, avg_pool2d(3, 1, 1).
struct AvgPool2dParams {
  int kernel = 3;
  int stride = 1;
  int padding = 1;
  bool ceil_mode = false;
  // Whether the divisor counts the explicit padding. PyTorch's rule: window (oy, ox) starts at
  // hs = oy * s - p and ends at he = min(hs + k, H + p), so the part of a ceil-mode window beyond
  // the right padding is never counted; the divisor is (he - hs) * (we - ws) with count_include_pad,
  // else the number of input positions in the window.
  bool count_include_pad = true;
};

// x: (N, H, W, C). Returns (N, OH, OW, C), sized as max_pool2d_output_shape.
Shape avg_pool2d_output_shape(const AvgPool2dParams& p, const Shape& x);
// y: (N, OH, OW, C), overwritten with each window's sum divided by its divisor.
void avg_pool2d_forward(Context& ctx, const AvgPool2dParams& p, const Tensor& x, Tensor& y);
// dy: (N, OH, OW, C); dx: (N, H, W, C), overwritten: dx[i] = sum over the windows o holding i of
// dy[o] / divisor(o).
void avg_pool2d_backward(Context& ctx, const AvgPool2dParams& p, const Tensor& dy, Tensor& dx);

// PyTorch AdaptiveAvgPool2d((out_h, out_w)). Output row oy averages input rows
// [floor(oy * H / OH), ceil((oy + 1) * H / OH)), and the same for columns: windows overlap where
// OH does not divide H, and repeat input rows where OH > H.
struct AdaptiveAvgPool2dParams {
  int out_h = 1;
  int out_w = 1;
};

// x: (N, H, W, C). Returns (N, out_h, out_w, C).
Shape adaptive_avg_pool2d_output_shape(const AdaptiveAvgPool2dParams& p, const Shape& x);
// y: (N, out_h, out_w, C), overwritten.
void adaptive_avg_pool2d_forward(Context& ctx, const AdaptiveAvgPool2dParams& p, const Tensor& x, Tensor& y);
// dy: (N, out_h, out_w, C); dx: (N, H, W, C), overwritten: dy spread evenly over each window.
void adaptive_avg_pool2d_backward(Context& ctx, const AdaptiveAvgPool2dParams& p, const Tensor& dy, Tensor& dx);

// x: (N, H, W, C); y: (N, C) overwritten with the mean over H and W.
void global_avg_pool_forward(Context& ctx, const Tensor& x, Tensor& y);
// dy: (N, C); dx: (N, H, W, C) overwritten.
void global_avg_pool_backward(Context& ctx, const Tensor& dy, Tensor& dx);

}  // namespace scaletrain::ops
