// Unscaling the gradients on the CPU: one pass, counting what is not finite (inf or NaN) as it
// goes. The build has no -ffast-math, so std::isfinite is a real test.
#include <cmath>

#include "scaletrain/ops/loss_scale.hpp"

namespace scaletrain::ops::cpu {

int64_t unscale_gradients(Context&, float inv_scale, Tensor& grad) {
  float* g = grad.data<float>();
  const int64_t n = grad.numel();
  int64_t nonfinite = 0;
#pragma omp parallel for reduction(+ : nonfinite) schedule(static)
  for (int64_t j = 0; j < n; ++j) {
    nonfinite += std::isfinite(g[j]) ? 0 : 1;
    g[j] *= inv_scale;
  }
  return nonfinite;
}

}  // namespace scaletrain::ops::cpu
