// Batch normalisation over all dimensions but the last (channels-last), with PyTorch's
// conventions: training normalises with the biased batch variance and updates the running
// variance with the unbiased one; running = (1 - momentum) * running + momentum * batch.
#pragma once

#include "scaletrain/backend/context.hpp"

namespace scaletrain::ops {

struct BatchNormParams {
  float eps = 1e-5f;      // PyTorch BatchNorm2d default
  float momentum = 0.1f;  // PyTorch BatchNorm2d default
};

// x, y: (..., C), y overwritten (y may alias x). gamma, beta: (C).
// running_mean, running_var: (C), updated in place. saved_mean, saved_inv_std: (C), overwritten
// with the batch mean and 1/sqrt(biased var + eps), kept for backward.
void batch_norm_forward_training(Context& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& gamma,
                                 const Tensor& beta, Tensor& running_mean, Tensor& running_var, Tensor& y,
                                 Tensor& saved_mean, Tensor& saved_inv_std);
// Evaluation: normalises with the running statistics. y overwritten (may alias x).
void batch_norm_forward_inference(Context& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& gamma,
                                  const Tensor& beta, const Tensor& running_mean, const Tensor& running_var, Tensor& y);
// dx: (..., C) overwritten; dgamma, dbeta: (C) overwritten.
void batch_norm_backward(Context& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                         const Tensor& saved_mean, const Tensor& saved_inv_std, Tensor& dx, Tensor& dgamma,
                         Tensor& dbeta);

}  // namespace scaletrain::ops
