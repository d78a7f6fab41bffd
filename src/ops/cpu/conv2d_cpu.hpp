// Private: the CPU (oneDNN) conv2d kernels behind the public dispatch in src/ops/conv2d.cpp.
// Arguments are already checked there (shapes, dtypes, devices).
#pragma once

#include "scaletrain/ops/conv2d.hpp"

namespace scaletrain::ops::cpu {

void conv2d_forward(Context& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& w, Tensor& y);
void conv2d_backward_data(Context& ctx, const Conv2dParams& p, const Tensor& dy, const Tensor& w, Tensor& dx);
void conv2d_backward_filter(Context& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& dy, Tensor& dw);

}  // namespace scaletrain::ops::cpu
