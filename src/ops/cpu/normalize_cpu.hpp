// Private: the CPU image-normalisation kernel behind the public dispatch in src/ops/normalize.cpp.
// Arguments are already checked there (shapes, dtypes, devices, channel counts).
#pragma once

#include "scaletrain/ops/normalize.hpp"

namespace scaletrain::ops::cpu {

void normalize_images(Context& ctx, const Tensor& x, const std::vector<double>& mean, const std::vector<double>& std,
                      Tensor& y);

}  // namespace scaletrain::ops::cpu
