// Gradient accumulation's sums on the CPU: a plain loop (one parameter tensor at a time, called
// from backward's grad-ready hook; the tensors are small next to the work that wrote them).
#include "scaletrain/ops/accumulate.hpp"

namespace scaletrain::ops::cpu {

void accumulate_gradient(Context&, AccumulateStage stage, float scale, Tensor& sum_t, Tensor& grad_t) {
  float* s = sum_t.data<float>();
  float* g = grad_t.data<float>();
  const int64_t n = grad_t.numel();
  switch (stage) {
    case AccumulateStage::first:
      for (int64_t j = 0; j < n; ++j) s[j] = g[j];
      return;
    case AccumulateStage::middle:
      for (int64_t j = 0; j < n; ++j) s[j] += g[j];
      return;
    case AccumulateStage::last:
      for (int64_t j = 0; j < n; ++j) g[j] = (s[j] + g[j]) * scale;
      return;
  }
}

}  // namespace scaletrain::ops::cpu
