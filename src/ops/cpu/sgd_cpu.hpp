// Private: the CPU SGD update behind src/ops/sgd.cpp (arguments checked there).
#pragma once

#include "scaletrain/ops/sgd.hpp"

namespace scaletrain::ops::cpu {
void sgd_update(Context& ctx, const SgdUpdateParams& p, Tensor& w, const Tensor& grad, Tensor& momentum);
}
