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
// Batch norm, then z added, then ReLU, as one op: y = max(0, bn(x) + z), the end of every ResNet
// block (issue 26, section 3: cuDNN's CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION). x, z and y of one
// shape; statistics as batch_norm_forward_training's. Computed in fp32 and stored once: in fp32 the
// bits of the three ops, under a mixed precision y rounded once where the three ops round bn(x)
// and the sum too (a unit of the format apart at most). `reserve` (u8) carries what backward needs
// from this forward on a GPU (cuDNN's reserve space, reallocated by the op when too small; left
// as it is on the CPU); keep it for the backward of this forward.
void batch_norm_add_relu_forward_training(Context& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& z,
                                          const Tensor& gamma, const Tensor& beta, Tensor& running_mean,
                                          Tensor& running_var, Tensor& y, Tensor& saved_mean, Tensor& saved_inv_std,
                                          Tensor& reserve);
// Its backward from the forward's x, y, statistics and reserve: dz = dy where y > 0, else 0 (the
// gradient through the ReLU, which is the residual branch's), then batch norm's backward of dz:
// dx, dgamma, dbeta. The bits of relu_backward and batch_norm_backward.
void batch_norm_add_relu_backward(Context& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& y,
                                  const Tensor& dy, const Tensor& gamma, const Tensor& beta, const Tensor& saved_mean,
                                  const Tensor& saved_inv_std, const Tensor& reserve, Tensor& dx, Tensor& dz,
                                  Tensor& dgamma, Tensor& dbeta);

// Batch norm then ReLU, as one op: y = max(0, bn(x)), the batch norms of ResNet's blocks before
// their last and of GoogLeNet's and Inception-v3's BasicConv2d (issue 26, section 3: cuDNN's
// CUDNN_BATCHNORM_OPS_BN_ACTIVATION). Arguments as batch_norm_add_relu_forward_training's without
// z. Computed in fp32 and stored once: the values of the two ops in every precision (rounding keeps
// a value's sign, so ReLU and the rounding commute; a negative value that rounds to -0 gives +0).
void batch_norm_relu_forward_training(Context& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& gamma,
                                      const Tensor& beta, Tensor& running_mean, Tensor& running_var, Tensor& y,
                                      Tensor& saved_mean, Tensor& saved_inv_std, Tensor& reserve);
// Its backward from the forward's x, y, statistics and reserve: dy where y > 0, else 0 (the ReLU's
// gradient), then batch norm's backward of that: dx, dgamma, dbeta. The bits of relu_backward and
// batch_norm_backward.
void batch_norm_relu_backward(Context& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& y,
                              const Tensor& dy, const Tensor& gamma, const Tensor& beta, const Tensor& saved_mean,
                              const Tensor& saved_inv_std, const Tensor& reserve, Tensor& dx, Tensor& dgamma,
                              Tensor& dbeta);

struct BatchNormDescriptorDims {
  int64_t n, c, h, w;
};
BatchNormDescriptorDims batch_norm_descriptor_dims(const Shape& x);

}  // namespace scaletrain::ops
