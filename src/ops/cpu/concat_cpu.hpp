// Private: the CPU feature-concatenation kernels behind the public dispatch in src/ops/concat.cpp.
// Arguments are already checked there (shapes, dtypes, devices).
#pragma once

#include "scaletrain/ops/concat.hpp"

namespace scaletrain::ops::cpu {

void concat_features_forward(Context& ctx, const Tensor& a, const Tensor& b, Tensor& y);
void concat_features_backward(Context& ctx, const Tensor& dy, Tensor& da, Tensor& db);

}  // namespace scaletrain::ops::cpu
