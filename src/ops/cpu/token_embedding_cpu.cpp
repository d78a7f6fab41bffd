// CPU scaled, masked, position-added embedding: one pass per token row, rows split over the threads.
#include <cstdint>

#include "scaletrain/ops/token_embedding.hpp"

namespace scaletrain::ops::cpu {

void token_embedding_forward(Context& ctx, const Tensor& x, const Tensor& ids, float scale, const Tensor& positions,
                             Tensor& y) {
  const int64_t rows = x.dim(0) * x.dim(1), length = x.dim(1), d = x.dim(2);
  const float* xp = x.data<float>();
  const int32_t* id = ids.data<int32_t>();
  const float* pe = positions.data<float>();
  float* yp = y.data<float>();
#pragma omp parallel for schedule(static) if (rows * d >= (1 << 15))
  for (int64_t r = 0; r < rows; ++r) {
    const float s = id[r] != 0 ? scale : 0.0f;
    const float* pos = pe + (r % length) * d;
    for (int64_t k = 0; k < d; ++k) yp[r * d + k] = s * xp[r * d + k] + pos[k];
  }
}

void token_embedding_backward(Context& ctx, const Tensor& ids, float scale, const Tensor& dy, Tensor& dx) {
  const int64_t rows = dy.dim(0) * dy.dim(1), d = dy.dim(2);
  const int32_t* id = ids.data<int32_t>();
  const float* g = dy.data<float>();
  float* out = dx.data<float>();
#pragma omp parallel for schedule(static) if (rows * d >= (1 << 15))
  for (int64_t r = 0; r < rows; ++r) {
    const float s = id[r] != 0 ? scale : 0.0f;
    for (int64_t k = 0; k < d; ++k) out[r * d + k] = s * g[r * d + k];
  }
}

}  // namespace scaletrain::ops::cpu
