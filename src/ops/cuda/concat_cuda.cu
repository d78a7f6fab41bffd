// CUDA feature concatenation and its split: one grid-stride pass over the output (or dy), each
// element a copy from its side. Copies: the same bits as the CPU.
#include "backend/cuda/cuda_context.hpp"
#include "ops/cuda/grid_stride.cuh"
#include "scaletrain/ops/concat.hpp"

namespace scaletrain::ops::cuda {
namespace {

__global__ void concat_kernel(const float* a, const float* b, float* y, int64_t n, int64_t wa, int64_t wb) {
  const int64_t wy = wa + wb, total = n * wy;
  for (int64_t e = grid_first(); e < total; e += grid_stride()) {
    const int64_t i = e / wy, j = e - i * wy;
    y[e] = j < wa ? a[i * wa + j] : b[i * wb + (j - wa)];
  }
}

__global__ void split_kernel(const float* dy, float* da, float* db, int64_t n, int64_t wa, int64_t wb) {
  const int64_t wy = wa + wb, total = n * wy;
  for (int64_t e = grid_first(); e < total; e += grid_stride()) {
    const int64_t i = e / wy, j = e - i * wy;
    if (j < wa)
      da[i * wa + j] = dy[e];
    else
      db[i * wb + (j - wa)] = dy[e];
  }
}

}  // namespace

void concat_features_forward(Context& ctx, const Tensor& a, const Tensor& b, Tensor& y) {
  const int64_t n = a.dim(0), wa = a.dim(1), wb = b.dim(1);
  if (n * (wa + wb) == 0) return;
  concat_kernel<<<scaletrain::cuda::blocks_for(n * (wa + wb)), scaletrain::cuda::kThreadsPerBlock, 0,
                  scaletrain::cuda::compute_stream(ctx)>>>(
      static_cast<const float*>(a.raw()), static_cast<const float*>(b.raw()), static_cast<float*>(y.raw()), n, wa, wb);
  ST_CHECK_LAUNCH();
}

void concat_features_backward(Context& ctx, const Tensor& dy, Tensor& da, Tensor& db) {
  const int64_t n = da.dim(0), wa = da.dim(1), wb = db.dim(1);
  if (n * (wa + wb) == 0) return;
  split_kernel<<<scaletrain::cuda::blocks_for(n * (wa + wb)), scaletrain::cuda::kThreadsPerBlock, 0,
                 scaletrain::cuda::compute_stream(ctx)>>>(
      static_cast<const float*>(dy.raw()), static_cast<float*>(da.raw()), static_cast<float*>(db.raw()), n, wa, wb);
  ST_CHECK_LAUNCH();
}

}  // namespace scaletrain::ops::cuda
