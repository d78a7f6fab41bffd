// The LARS passes on the CPU: chunks in parallel (OpenMP), each chunk's loop vectorised.
#include "scaletrain/ops/lars.hpp"

namespace scaletrain::ops::cpu {

namespace {
// Below this many elements, threads cost more than they save (the same bound as the SGD kernel).
constexpr int64_t kParallelElements = int64_t{1} << 15;
}  // namespace

void lars_sums_of_squares(Context&, const Tensor& w_t, const Tensor& g_t, const std::vector<LarsChunk>& chunks,
                          std::vector<double>& w_sq, std::vector<double>& g_sq) {
  const float* w = w_t.data<float>();
  const float* g = g_t.data<float>();
  const int64_t num_chunks = static_cast<int64_t>(chunks.size());
  // Squares in double: a 2.4 M-element float sum would lose digits the trust ratio needs.
#pragma omp parallel for schedule(dynamic, 8) if (w_t.numel() > kParallelElements)
  for (int64_t c = 0; c < num_chunks; ++c) {
    double ws = 0.0, gs = 0.0;
#pragma omp simd reduction(+ : ws, gs)
    for (int64_t i = chunks[c].begin; i < chunks[c].end; ++i) {
      ws += static_cast<double>(w[i]) * w[i];
      gs += static_cast<double>(g[i]) * g[i];
    }
    w_sq[c] = ws;
    g_sq[c] = gs;
  }
}

void lars_update(Context&, float momentum, const std::vector<LarsChunk>& chunks, const std::vector<float>& scaled_lr,
                 const std::vector<float>& weight_decay, Tensor& w_t, const Tensor& g_t, Tensor& v_t) {
  float* w = w_t.data<float>();
  const float* g = g_t.data<float>();
  float* v = v_t.data<float>();
  const float mu = momentum;
  const int64_t num_chunks = static_cast<int64_t>(chunks.size());
#pragma omp parallel for schedule(dynamic, 8) if (w_t.numel() > kParallelElements)
  for (int64_t c = 0; c < num_chunks; ++c) {
    const float lr = scaled_lr[c], wd = weight_decay[c];
#pragma omp simd
    for (int64_t i = chunks[c].begin; i < chunks[c].end; ++i) {
      const float vi = mu * v[i] + lr * (g[i] + wd * w[i]);
      v[i] = vi;
      w[i] = w[i] - vi;
    }
  }
}

}  // namespace scaletrain::ops::cpu
