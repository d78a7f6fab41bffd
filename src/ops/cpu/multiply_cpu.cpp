// CPU element-wise product: one vectorised pass, split statically over the threads, as the add
// kernel in activation_cpu.cpp (pure memory traffic; no oneDNN primitive is worth its lookup).
#include <cstdint>

#include "scaletrain/ops/multiply.hpp"

namespace scaletrain::ops::cpu {
namespace {

constexpr int64_t kParallelMin = 1 << 15;  // below this many elements a thread team costs more than it saves

}  // namespace

void multiply_forward(Context& ctx, const Tensor& a, const Tensor& b, Tensor& y) {
  const int64_t n = a.numel();
  const float* ap = a.data<float>();
  const float* bp = b.data<float>();
  float* yp = y.data<float>();
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) yp[i] = ap[i] * bp[i];
}

void multiply_backward(Context& ctx, const Tensor& a, const Tensor& b, const Tensor& dy, Tensor& da, Tensor& db) {
  const int64_t n = a.numel();
  const float* ap = a.data<float>();
  const float* bp = b.data<float>();
  const float* g = dy.data<float>();
  float* dap = da.data<float>();
  float* dbp = db.data<float>();
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i];  // read before either write: da or db may alias dy
    dap[i] = gi * bp[i];
    dbp[i] = gi * ap[i];
  }
}

}  // namespace scaletrain::ops::cpu
