// CPU masked softmax over the last dimension (attention scores): one row at a time, parallel over
// rows. The row's maximum over its valid keys is subtracted before exp, the sum is in double and
// each probability is rounded once; masked entries are exactly 0.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "scaletrain/core/error.hpp"
#include "scaletrain/ops/softmax.hpp"

namespace scaletrain::ops::cpu {
namespace {

constexpr int64_t kParallelMin = 1 << 15;  // below this many elements a thread team costs more than it saves

}  // namespace

void masked_softmax_forward(Context& /*ctx*/, const SoftmaxMask& mask, const Tensor& x, const Tensor& key_lengths,
                            Tensor& y) {
  const int64_t n = x.dim(0), heads = x.dim(1), lq = x.dim(2), lk = x.dim(3);
  const int32_t* lengths = key_lengths.data<int32_t>();
  for (int64_t b = 0; b < n; ++b)
    ST_CHECK(lengths[b] >= 1 && lengths[b] <= lk,
             "masked_softmax_forward: key_lengths[" << b << "] is " << lengths[b] << ", outside [1, " << lk << "]");
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  const int64_t rows = n * heads * lq;
#pragma omp parallel for schedule(static) if (x.numel() >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = r / (heads * lq), i = r % lq;
    const int64_t valid = mask.causal ? std::min<int64_t>(lengths[b], i + 1) : lengths[b];
    const float* in = xp + r * lk;
    float* out = yp + r * lk;
    float top = in[0];
    for (int64_t j = 1; j < valid; ++j) top = std::max(top, in[j]);
    double sum = 0.0;
    for (int64_t j = 0; j < valid; ++j) sum += std::exp(static_cast<double>(in[j]) - top);
    for (int64_t j = 0; j < valid; ++j) out[j] = static_cast<float>(std::exp(static_cast<double>(in[j]) - top) / sum);
    std::fill(out + valid, out + lk, 0.0f);
  }
}

void masked_softmax_backward(Context& /*ctx*/, const Tensor& y, const Tensor& dy, Tensor& dx) {
  const int64_t lk = y.dim(3), rows = y.numel() / lk;
  const float* yp = y.data<float>();
  const float* dyp = dy.data<float>();
  float* dxp = dx.data<float>();
#pragma omp parallel for schedule(static) if (y.numel() >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const float* yr = yp + r * lk;
    const float* dr = dyp + r * lk;
    double dot = 0.0;
    for (int64_t j = 0; j < lk; ++j) dot += static_cast<double>(dr[j]) * yr[j];
    float* out = dxp + r * lk;
    for (int64_t j = 0; j < lk; ++j) out[j] = static_cast<float>(yr[j] * (dr[j] - dot));
  }
}

}  // namespace scaletrain::ops::cpu
