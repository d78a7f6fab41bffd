// Private: the CUDA max pooling and global average pooling kernels behind the public dispatch in
// src/ops/pool.cpp. Arguments are already checked there (shapes, dtypes, devices). Free of CUDA
// headers, so the dispatcher includes it in every build; defined in pool_cuda.cu where CUDA is built.
#pragma once

#include "scaletrain/ops/pool.hpp"

namespace scaletrain::ops::cuda {

void max_pool2d_forward(Context& ctx, const MaxPool2dParams& p, const Tensor& x, Tensor& y);
void max_pool2d_backward(Context& ctx, const MaxPool2dParams& p, const Tensor& x, const Tensor& y, const Tensor& dy,
                         Tensor& dx);
void global_avg_pool_forward(Context& ctx, const Tensor& x, Tensor& y);
void global_avg_pool_backward(Context& ctx, const Tensor& dy, Tensor& dx);

}  // namespace scaletrain::ops::cuda
