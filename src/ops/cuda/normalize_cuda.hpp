// Private: the CUDA image-normalisation kernel behind the public dispatch in src/ops/normalize.cpp.
// Arguments are already checked there (shapes, dtypes, devices, channel counts). Free of CUDA
// headers, so the dispatcher includes it in every build; defined in normalize_cuda.cu where CUDA is built.
#pragma once

#include "scaletrain/ops/normalize.hpp"

namespace scaletrain::ops::cuda {

// At most kMaxNormalizeChannels channels (the per-channel statistics travel as kernel arguments).
constexpr int kMaxNormalizeChannels = 16;

void normalize_images(Context& ctx, const Tensor& x, const std::vector<double>& mean, const std::vector<double>& std,
                      Tensor& y);

}  // namespace scaletrain::ops::cuda
