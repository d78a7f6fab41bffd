// Private: the CUDA softmax cross-entropy and top-1 counting kernels behind the public dispatch in
// src/ops/loss.cpp. Shapes, dtypes and devices are already checked there; the label range is
// checked on the device and reported as the CPU kernel reports it. Free of CUDA headers, so the
// dispatcher includes it in every build; defined in loss_cuda.cu where CUDA is built.
#pragma once

#include "scaletrain/ops/loss.hpp"

namespace scaletrain::ops::cuda {

double softmax_cross_entropy(Context& ctx, const Tensor& logits, const Tensor& labels, double eps, Tensor& dlogits);
int64_t count_correct(Context& ctx, const Tensor& logits, const Tensor& labels);

}  // namespace scaletrain::ops::cuda
