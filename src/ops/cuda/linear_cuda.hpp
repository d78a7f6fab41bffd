// Private: the CUDA (cuBLAS) linear kernels behind the public dispatch in src/ops/linear.cpp.
// Arguments are already checked there (shapes, dtypes, devices). Free of CUDA headers, so the
// dispatcher includes it in every build.
#pragma once

#include "scaletrain/ops/linear.hpp"

namespace scaletrain::ops::cuda {

void linear_forward(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y);
void linear_backward(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw,
                     Tensor& db);

}  // namespace scaletrain::ops::cuda
