// Private: the CUDA ReLU and element-wise add kernels behind the public dispatch in src/ops/activation.cpp.
// Arguments are already checked there (shapes, dtypes, devices). Free of CUDA headers, so the
// dispatcher includes it in every build; defined in activation_cuda.cu where CUDA is built.
#pragma once

#include "scaletrain/ops/activation.hpp"

namespace scaletrain::ops::cuda {

void relu_forward(Context& ctx, const Tensor& x, Tensor& y);
void relu_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx);
void add_forward(Context& ctx, const Tensor& a, const Tensor& b, Tensor& y);
void add_inplace(Context& ctx, Tensor& y, const Tensor& x);

}  // namespace scaletrain::ops::cuda
