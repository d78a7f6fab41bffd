// CPU feature concatenation and its split: two row copies per sample, split statically over the
// threads by row.
#include <cstdint>
#include <cstring>

#include "scaletrain/ops/concat.hpp"

namespace scaletrain::ops::cpu {
namespace {

constexpr int64_t kParallelMin = 1 << 15;  // elements moved; below this a thread team costs more than it saves

}  // namespace

void concat_features_forward(Context& ctx, const Tensor& a, const Tensor& b, Tensor& y) {
  const int64_t n = a.dim(0), wa = a.dim(1), wb = b.dim(1), wy = wa + wb;
  const float* ap = a.data<float>();
  const float* bp = b.data<float>();
  float* yp = y.data<float>();
#pragma omp parallel for schedule(static) if (n * wy >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(yp + i * wy, ap + i * wa, wa * sizeof(float));
    std::memcpy(yp + i * wy + wa, bp + i * wb, wb * sizeof(float));
  }
}

void concat_features_backward(Context& ctx, const Tensor& dy, Tensor& da, Tensor& db) {
  const int64_t n = da.dim(0), wa = da.dim(1), wb = db.dim(1), wy = wa + wb;
  const float* g = dy.data<float>();
  float* dap = da.data<float>();
  float* dbp = db.data<float>();
#pragma omp parallel for schedule(static) if (n * wy >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(dap + i * wa, g + i * wy, wa * sizeof(float));
    std::memcpy(dbp + i * wb, g + i * wy + wa, wb * sizeof(float));
  }
}

}  // namespace scaletrain::ops::cpu
