// Private: the CPU element-wise product kernels behind the public dispatch in src/ops/multiply.cpp.
// Arguments are already checked there (shapes, dtypes, devices).
#pragma once

#include "scaletrain/ops/multiply.hpp"

namespace scaletrain::ops::cpu {

void multiply_forward(Context& ctx, const Tensor& a, const Tensor& b, Tensor& y);
void multiply_backward(Context& ctx, const Tensor& a, const Tensor& b, const Tensor& dy, Tensor& da, Tensor& db);

}  // namespace scaletrain::ops::cpu
