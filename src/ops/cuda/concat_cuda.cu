// CUDA concatenation along the last dimension and its split. concat_features: one grid-stride pass
// over the output (or dy), each element a copy from its side. concat_channels: one strided copy
// (cudaMemcpy2DAsync on the compute stream) per input, its C_i-float rows into their column block of
// the (rows, sum C_i) output, or back; no kernel. Copies: the same bits as the CPU.
#include <vector>

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

int64_t rows_of(const Tensor& t) {
  int64_t rows = 1;
  for (int i = 0; i + 1 < t.ndim(); ++i) rows *= t.dim(i);
  return rows;
}

// Copies between the whole (rows, W) and its parts (rows, C_i): into the whole when `join`, else out.
void copy_parts(Context& ctx, const Tensor& whole, const std::vector<Tensor>& parts, bool join) {
  const int64_t rows = rows_of(whole);
  const std::size_t pitch = static_cast<std::size_t>(whole.dim(-1)) * sizeof(float);
  char* base = static_cast<char*>(whole.raw());
  std::size_t offset = 0;
  for (const Tensor& t : parts) {
    const std::size_t width = static_cast<std::size_t>(t.dim(-1)) * sizeof(float);
    if (rows > 0 && width > 0) {
      char* column = base + offset;
      void* dst = join ? static_cast<void*>(column) : t.raw();
      const void* src = join ? t.raw() : static_cast<const void*>(column);
      ST_CHECK_CUDA(cudaMemcpy2DAsync(dst, join ? pitch : width, src, join ? width : pitch, width,
                                      static_cast<std::size_t>(rows), cudaMemcpyDeviceToDevice,
                                      scaletrain::cuda::compute_stream(ctx)));
    }
    offset += width;
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

void concat_channels_forward(Context& ctx, const std::vector<Tensor>& xs, Tensor& y) { copy_parts(ctx, y, xs, true); }

void concat_channels_backward(Context& ctx, const Tensor& dy, const std::vector<Tensor>& dxs) {
  copy_parts(ctx, dy, dxs, false);
}

}  // namespace scaletrain::ops::cuda
