// Private: the CUDA (cuDNN) batch norm kernels behind the public dispatch in
// src/ops/batch_norm.cpp. Arguments are already checked there (shapes, dtypes, devices, eps and
// momentum ranges). Free of CUDA headers, so the dispatcher includes it in every build.
#pragma once

#include "scaletrain/ops/batch_norm.hpp"

namespace scaletrain::ops::cuda {

void batch_norm_forward_training(Context& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& gamma,
                                 const Tensor& beta, Tensor& running_mean, Tensor& running_var, Tensor& y,
                                 Tensor& saved_mean, Tensor& saved_inv_std);
void batch_norm_forward_inference(Context& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& gamma,
                                  const Tensor& beta, const Tensor& running_mean, const Tensor& running_var, Tensor& y);
void batch_norm_backward(Context& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                         const Tensor& saved_mean, const Tensor& saved_inv_std, Tensor& dx, Tensor& dgamma,
                         Tensor& dbeta);

}  // namespace scaletrain::ops::cuda
