// Private: the CUDA SGD update behind src/ops/sgd.cpp (arguments checked there). CUDA-free, so
// the dispatcher includes it in every build.
#pragma once

#include "scaletrain/ops/sgd.hpp"

namespace scaletrain::ops::cuda {
void sgd_update(Context& ctx, const SgdUpdateParams& p, Tensor& w, const Tensor& grad, Tensor& momentum);
}
