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

// How the CUDA backend describes x to cuDNN's spatial batch norm, as the logical (N, C, H, W) of an
// NHWC descriptor: a 4-D (N, H, W, C) as it is; any other (..., C) as (1, C, M, 1), M the
// product of the leading dims. Both are M rows of C channels in memory with statistics over M
// values per channel; (1, C, M, 1) rather than (M, C, 1, 1) because cuDNN's spatial batch norm
// refuses an N above about 65,535 in inference and 880,801 in training, not a large H.
struct BatchNormDescriptorDims {
  int64_t n, c, h, w;
};
BatchNormDescriptorDims batch_norm_descriptor_dims(const Shape& x);

}  // namespace scaletrain::ops
