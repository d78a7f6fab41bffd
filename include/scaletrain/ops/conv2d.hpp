// 2-D convolution without bias (dilation 1, groups 1), as PyTorch's Conv2d(bias=False).
// CPU: oneDNN convolution primitives on channels-last activations.
#pragma once

#include "scaletrain/backend/context.hpp"

namespace scaletrain::ops {

struct Conv2dParams {
  int stride = 1;
  int padding = 0;
};

// x: (N, H, W, C); w: (O, C, KH, KW). Returns (N, OH, OW, O).
Shape conv2d_output_shape(const Conv2dParams& p, const Shape& x, const Shape& w);

// y: (N, OH, OW, O), overwritten.
void conv2d_forward(Context& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& w, Tensor& y);
// dy: (N, OH, OW, O); dx: (N, H, W, C), overwritten.
void conv2d_backward_data(Context& ctx, const Conv2dParams& p, const Tensor& dy, const Tensor& w, Tensor& dx);
// dw: (O, C, KH, KW), overwritten.
void conv2d_backward_filter(Context& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& dy, Tensor& dw);

}  // namespace scaletrain::ops
