// Private: the CUDA (cuDNN) conv2d kernels behind the public dispatch in src/ops/conv2d.cpp.
// Arguments are already checked there (shapes, dtypes, devices). Free of CUDA headers, so the
// dispatcher includes it in every build and calls it where SCALETRAIN_HAVE_CUDA is 1.
#pragma once

#include "scaletrain/ops/conv2d.hpp"

namespace scaletrain::ops::cuda {

void conv2d_forward(Context& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& w, Tensor& y);
void conv2d_backward_data(Context& ctx, const Conv2dParams& p, const Tensor& dy, const Tensor& w, Tensor& dx);
void conv2d_backward_filter(Context& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& dy, Tensor& dw);

}  // namespace scaletrain::ops::cuda
