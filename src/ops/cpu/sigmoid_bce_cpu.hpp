// Private: the CPU binary cross-entropy kernel behind the public dispatch in src/ops/sigmoid_bce.cpp.
// Arguments are already checked there (shapes, dtypes, devices).
#pragma once

#include "scaletrain/ops/sigmoid_bce.hpp"

namespace scaletrain::ops::cpu {

double sigmoid_bce_with_logits(Context& ctx, const Tensor& logits, const Tensor& targets, Tensor& dlogits);

}  // namespace scaletrain::ops::cpu
