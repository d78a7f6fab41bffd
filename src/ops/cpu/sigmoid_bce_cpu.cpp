// CPU binary cross-entropy on logits. Each sample's loss and gradient are computed in double
// (exp and log1p of a float argument cost little next to the reads) and the gradient rounded
// once. The mean is a sum over fixed chunks of samples, computed in parallel and added in chunk
// order, so the loss is the same bits for any thread count (NCF's batches reach 10^6 samples).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "scaletrain/ops/sigmoid_bce.hpp"

namespace scaletrain::ops::cpu {
namespace {

constexpr int64_t kChunk = 1 << 12;        // samples per partial sum
constexpr int64_t kParallelMin = 1 << 14;  // samples; below this a thread team costs more than it saves

// 1 / (1 + exp(-x)) without overflow: exp is only taken of a non-positive number.
double stable_sigmoid(double x) {
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1.0 + e);
}

// Sum of the losses of samples [begin, end), writing their gradients (scaled by dx_scale) if asked.
double chunk_loss(const float* x, const float* y, float* dx, int64_t begin, int64_t end, double dx_scale) {
  double sum = 0.0;
  for (int64_t i = begin; i < end; ++i) {
    const double xi = x[i], yi = y[i];
    sum += std::max(xi, 0.0) - xi * yi + std::log1p(std::exp(-std::fabs(xi)));
    if (dx) dx[i] = static_cast<float>((stable_sigmoid(xi) - yi) * dx_scale);
  }
  return sum;
}

}  // namespace

double sigmoid_bce_with_logits(Context& ctx, const Tensor& logits, const Tensor& targets, Tensor& dlogits,
                               double grad_scale) {
  const int64_t n = logits.numel();
  const float* x = logits.data<float>();
  const float* y = targets.data<float>();
  float* dx = dlogits.defined() ? dlogits.data<float>() : nullptr;
  const double inv_n = 1.0 / static_cast<double>(n);
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(chunks);
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t c = 0; c < chunks; ++c)
    partial[c] = chunk_loss(x, y, dx, c * kChunk, std::min(n, (c + 1) * kChunk), grad_scale * inv_n);
  double total = 0.0;
  for (double p : partial) total += p;  // chunk order: independent of the thread count
  return total * inv_n;
}

}  // namespace scaletrain::ops::cpu
