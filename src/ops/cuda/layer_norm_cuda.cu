// CUDA layer normalisation over the last dimension: own kernels (cuDNN 9 has layer norm only in
// its graph API, and cuDNN 8 on a CUDA 12 DGX-1 build not as a plain call). As on the CPU
// (layer_norm_cpu.cpp), the row statistics are summed in double, two passes, and the parameter
// gradients are column sums over the rows in row order: deterministic, and equal to the CPU's to
// float rounding.
//
// Forward and dx: one block of kThreadsPerBlock threads per row (rows grid-strided); each thread
// sums a strided share of the row, and the block adds the shares in a fixed tree order in shared
// memory. dgamma and dbeta: one thread per column, walking the rows in order (adjacent threads
// read adjacent columns, so every row is read in coalesced pieces).
// 16-bit storage (with_half_storage): x, y, dy and dx are read and written in their own formats
// (ops/cuda/half_io.cuh), gamma, beta, the saved statistics and the parameter gradients stay fp32;
// every value is computed as before from the widened inputs and stored once, so a 16-bit output
// has the bits of the fp32 kernel's rounded by the dispatch.
#include "backend/cuda/cuda_context.hpp"
#include "ops/cuda/block_reduce.cuh"
#include "ops/cuda/grid_stride.cuh"
#include "ops/cuda/half_gemm.hpp"
#include "ops/cuda/half_io.cuh"
#include "scaletrain/ops/layer_norm.hpp"

namespace scaletrain::ops::cuda {
namespace {

constexpr int kThreads = scaletrain::cuda::kThreadsPerBlock;

__global__ void layer_norm_forward_kernel(const void* x, ElemKind xk, const float* gamma, const float* beta, void* y,
                                          ElemKind yk, float* saved_mean, float* saved_rstd, int64_t rows, int64_t d,
                                          double eps) {
  __shared__ double scratch[kThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t row = r * d;
    double part = 0.0;
    for (int64_t j = threadIdx.x; j < d; j += kThreads) part += load_float(x, xk, row + j);
    const double mean = block_sum(part, scratch) / static_cast<double>(d);
    part = 0.0;
    for (int64_t j = threadIdx.x; j < d; j += kThreads) {
      const float v = load_float(x, xk, row + j);
      part += (v - mean) * (v - mean);
    }
    const double rstd = 1.0 / sqrt(block_sum(part, scratch) / static_cast<double>(d) + eps);
    for (int64_t j = threadIdx.x; j < d; j += kThreads)
      store_float(y, yk, row + j,
                  static_cast<float>((load_float(x, xk, row + j) - mean) * rstd * static_cast<double>(gamma[j]) +
                                     static_cast<double>(beta[j])));
    if (threadIdx.x == 0) {
      saved_mean[r] = static_cast<float>(mean);
      saved_rstd[r] = static_cast<float>(rstd);
    }
  }
}

__global__ void layer_norm_dx_kernel(const void* x, ElemKind xk, const void* dy, ElemKind dyk, const float* gamma,
                                     const float* saved_mean, const float* saved_rstd, void* dx, ElemKind dxk,
                                     int64_t rows, int64_t d) {
  __shared__ double scratch[kThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t row = r * d;
    const double mu = saved_mean[r], s = saved_rstd[r];
    double part_g = 0.0, part_gx = 0.0;
    for (int64_t j = threadIdx.x; j < d; j += kThreads) {
      const double gj = static_cast<double>(load_float(dy, dyk, row + j)) * gamma[j];
      part_g += gj;
      part_gx += gj * ((load_float(x, xk, row + j) - mu) * s);
    }
    const double mean_g = block_sum(part_g, scratch) / static_cast<double>(d);
    const double mean_gx = block_sum(part_gx, scratch) / static_cast<double>(d);
    for (int64_t j = threadIdx.x; j < d; j += kThreads) {
      const double xhat = (load_float(x, xk, row + j) - mu) * s;
      store_float(dx, dxk, row + j,
                  static_cast<float>(
                      s * (static_cast<double>(load_float(dy, dyk, row + j)) * gamma[j] - mean_g - xhat * mean_gx)));
    }
  }
}

__global__ void layer_norm_params_kernel(const void* x, ElemKind xk, const void* dy, ElemKind dyk,
                                         const float* saved_mean, const float* saved_rstd, float* dgamma, float* dbeta,
                                         int64_t rows, int64_t d) {
  for (int64_t j = grid_first(); j < d; j += grid_stride()) {
    double sum_dg = 0.0, sum_db = 0.0;
    for (int64_t r = 0; r < rows; ++r) {
      const double dyj = load_float(dy, dyk, r * d + j);
      sum_dg += dyj * ((load_float(x, xk, r * d + j) - static_cast<double>(saved_mean[r])) *
                       static_cast<double>(saved_rstd[r]));
      sum_db += dyj;
    }
    dgamma[j] = static_cast<float>(sum_dg);
    dbeta[j] = static_cast<float>(sum_db);
  }
}

}  // namespace

void layer_norm_forward(Context& ctx, const LayerNormParams& p, const Tensor& x, const Tensor& gamma,
                        const Tensor& beta, Tensor& y, Tensor& saved_mean, Tensor& saved_rstd) {
  const int64_t d = x.dim(-1), rows = x.numel() / d;
  if (rows == 0) return;
  // gamma, beta and the statistics are fp32 in the layers; a 16-bit one (another caller's) is
  // widened first or written through an fp32 buffer, as the dispatch would.
  const Tensor gamma32 = fp32_of(ctx, gamma), beta32 = fp32_of(ctx, beta);
  Fp32Result mean32(ctx, saved_mean), rstd32(ctx, saved_rstd);
  layer_norm_forward_kernel<<<row_blocks(rows), kThreads, 0, scaletrain::cuda::compute_stream(ctx)>>>(
      x.raw(), elem_kind(x, "layer_norm_forward x"), static_cast<const float*>(gamma32.raw()),
      static_cast<const float*>(beta32.raw()), y.raw(), elem_kind(y, "layer_norm_forward y"), mean32.data(),
      rstd32.data(), rows, d, static_cast<double>(p.eps));
  ST_CHECK_LAUNCH();
  mean32.store();
  rstd32.store();
}

void layer_norm_backward(Context& ctx, const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& saved_mean,
                         const Tensor& saved_rstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  const int64_t d = x.dim(-1), rows = x.numel() / d;
  const auto stream = scaletrain::cuda::compute_stream(ctx);
  const Tensor gamma32 = fp32_of(ctx, gamma), mean32 = fp32_of(ctx, saved_mean), rstd32 = fp32_of(ctx, saved_rstd);
  Fp32Result dgamma32(ctx, dgamma), dbeta32(ctx, dbeta);
  if (rows > 0) {
    layer_norm_dx_kernel<<<row_blocks(rows), kThreads, 0, stream>>>(
        x.raw(), elem_kind(x, "layer_norm_backward x"), dy.raw(), elem_kind(dy, "layer_norm_backward dy"),
        static_cast<const float*>(gamma32.raw()), static_cast<const float*>(mean32.raw()),
        static_cast<const float*>(rstd32.raw()), dx.raw(), elem_kind(dx, "layer_norm_backward dx"), rows, d);
    ST_CHECK_LAUNCH();
  }
  layer_norm_params_kernel<<<scaletrain::cuda::blocks_for(d), kThreads, 0, stream>>>(
      x.raw(), elem_kind(x, "layer_norm_backward x"), dy.raw(), elem_kind(dy, "layer_norm_backward dy"),
      static_cast<const float*>(mean32.raw()), static_cast<const float*>(rstd32.raw()), dgamma32.data(), dbeta32.data(),
      rows, d);
  ST_CHECK_LAUNCH();
  dgamma32.store();
  dbeta32.store();
}

}  // namespace scaletrain::ops::cuda
