// conv2d_bn_stats_forward on the CPU: the reference of the fused GPU graph, written as its three
// steps (ops/conv2d.hpp): the prologue max(0, x * scale + bias) in fp32 (scale and bias rounded to
// the 16-bit format under a mixed precision, as the GPU's engine takes them), stored as an activation
// (rounded to the 16-bit format under a mixed precision, as the GPU's convolution reads it); the
// convolution (oneDNN, conv2d_cpu.cpp); y stored, then its per-channel sums over the stored
// values, accumulated in double so that the order of the terms does not matter at fp32.
#include <omp.h>

#include <algorithm>
#include <vector>

#include "scaletrain/backend/context.hpp"
#include "scaletrain/core/half.hpp"
#include "scaletrain/ops/conv2d.hpp"

namespace scaletrain::ops::cpu {

void conv2d_forward(Context& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y);

namespace {

// a = max(0, x * scale[c] + bias[c]) over (M, C) rows, the product and the sum each rounded to
// fp32 as the graph's MUL and ADD are.
void prologue(const Tensor& x, const Tensor& scale, const Tensor& bias, Tensor& a) {
  const int64_t c = x.dim(3), m = x.numel() / c;
  const float* px = x.data<float>();
  const float* s = scale.data<float>();
  const float* b = bias.data<float>();
  float* pa = a.data<float>();
#pragma omp parallel for schedule(static) if (m * c >= (int64_t{1} << 16))
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < c; ++j) {
      const float scaled = px[r * c + j] * s[j];
      const float shifted = scaled + b[j];
      pa[r * c + j] = std::max(shifted, 0.0f);
    }
}

// sum[o] and sqsum[o] of y's (M, O) rows, in double, stored as float.
void channel_sums(const Tensor& y, Tensor& sum, Tensor& sqsum) {
  const int64_t o = y.dim(3), m = y.numel() / o;
  const float* py = y.data<float>();
  std::vector<double> s(static_cast<std::size_t>(o), 0.0), q(static_cast<std::size_t>(o), 0.0);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < o; ++j) {
      const double v = py[r * o + j];
      s[static_cast<std::size_t>(j)] += v;
      q[static_cast<std::size_t>(j)] += v * v;
    }
  for (int64_t j = 0; j < o; ++j) {
    sum.data<float>()[j] = static_cast<float>(s[static_cast<std::size_t>(j)]);
    sqsum.data<float>()[j] = static_cast<float>(q[static_cast<std::size_t>(j)]);
  }
}

}  // namespace

void conv2d_bn_stats_forward(Context& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& scale,
                             const Tensor& bias, const Tensor& w, Tensor& y, Tensor& sum, Tensor& sqsum) {
  const std::optional<HalfFormat> format = storage_format(ctx.precision());
  Tensor input = x;
  if (scale.defined()) {
    Tensor s = scale, b = bias;
    if (format) {
      s = scale.clone(), b = bias.clone();
      round_in_place(*format, s.data<float>(), s.numel());
      round_in_place(*format, b.data<float>(), b.numel());
    }
    input = Tensor::empty(x.shape(), DType::f32);
    prologue(x, s, b, input);
    if (format) round_in_place(*format, input.data<float>(), input.numel());
  }
  cpu::conv2d_forward(ctx, p, input, w, Tensor(), y);
  // The statistics are of y as stored: rounded here, so the dispatch's rounding after is exact.
  if (format) round_in_place(*format, y.data<float>(), y.numel());
  channel_sums(y, sum, sqsum);
}

}  // namespace scaletrain::ops::cpu
