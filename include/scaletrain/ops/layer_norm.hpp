// Layer normalisation over the last dimension (the Transformer's sublayer norm; PyTorch's
// nn.LayerNorm(D) with elementwise affine): for each row of D values,
//
//   y = (x - mean) * rstd * gamma + beta,   rstd = 1 / sqrt(var + eps),
//
// mean and var (biased, divided by D) over the row. Kernels: own loops on the CPU (src/ops/cpu/
// layer_norm_cpu.cpp) and on CUDA (src/ops/cuda/layer_norm_cuda.cu), both with the row sums in
// double and two passes (mean, then the squared deviations), so that a row with a large mean and a
// small spread keeps its precision; the parameter gradients are column sums over the rows in row
// order, deterministic on both devices and independent of the thread count.
#pragma once

#include "scaletrain/backend/context.hpp"

namespace scaletrain::ops {

struct LayerNormParams {
  // PyTorch's default (nn.LayerNorm, nn.Transformer's layer_norm_eps). The MLPerf reference
  // Transformer (TensorFlow) uses 1e-6: the model sets its own.
  float eps = 1e-5f;
};

// x: (..., D), M rows of D values (M the product of the leading dims; D >= 1). gamma, beta: (D).
// y: x's shape, overwritten, overlapping neither x nor the parameters. saved_mean, saved_rstd:
// (M), overwritten with each row's mean and 1 / sqrt(var + eps), kept for backward.
void layer_norm_forward(Context& ctx, const LayerNormParams& p, const Tensor& x, const Tensor& gamma,
                        const Tensor& beta, Tensor& y, Tensor& saved_mean, Tensor& saved_rstd);
// dy: d(loss)/dy, x's shape. dx: x's shape; dgamma, dbeta: (D); all three overwritten (not
// accumulated), overlapping none of the inputs.
void layer_norm_backward(Context& ctx, const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& saved_mean,
                         const Tensor& saved_rstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta);

}  // namespace scaletrain::ops
