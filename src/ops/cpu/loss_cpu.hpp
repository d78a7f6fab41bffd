// Private: the CPU softmax cross-entropy and top-1 counting kernels behind the public dispatch in
// src/ops/loss.cpp. Shapes, dtypes and devices are already checked there; the label range is
// checked here, where the labels are read.
#pragma once

#include "scaletrain/ops/loss.hpp"

namespace scaletrain::ops::cpu {

double softmax_cross_entropy(Context& ctx, const Tensor& logits, const Tensor& labels, double eps, Tensor& dlogits);
int64_t count_correct(Context& ctx, const Tensor& logits, const Tensor& labels);

}  // namespace scaletrain::ops::cpu
