// CUDA masked softmax over the last dimension (attention scores): own kernels, as cuDNN's softmax
// has no masks. One block per row (rows grid-strided), as the CPU kernel (softmax_cpu.cpp): the
// maximum over the valid keys, the sum of exp in double in the block's fixed tree order, each
// probability rounded once, masked entries exactly 0. The key lengths are read on the device and
// clamped to [1, Lk]; the CPU kernel refuses a length outside that range (a GPU check would cost a
// copy back per call), and the tests run both on the same lengths.
// 16-bit storage (with_half_storage): x, y, dy and dx are read and written in their own formats
// (ops/cuda/half_io.cuh) and each value computed as before from the widened inputs, stored once.
#include <cfloat>

#include "backend/cuda/cuda_context.hpp"
#include "ops/cuda/block_reduce.cuh"
#include "ops/cuda/half_io.cuh"
#include "scaletrain/ops/softmax.hpp"

namespace scaletrain::ops::cuda {
namespace {

constexpr int kThreads = scaletrain::cuda::kThreadsPerBlock;

__global__ void masked_softmax_forward_kernel(const void* x, ElemKind xk, const int32_t* lengths, void* y, ElemKind yk,
                                              int64_t rows, int64_t heads, int64_t lq, int64_t lk, bool causal) {
  __shared__ float max_scratch[kThreads];
  __shared__ double sum_scratch[kThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t b = r / (heads * lq), i = r % lq;
    int64_t valid = lengths[b] < 1 ? 1 : (lengths[b] > lk ? lk : lengths[b]);
    if (causal && i + 1 < valid) valid = i + 1;
    const int64_t row = r * lk;
    float top = -FLT_MAX;
    for (int64_t j = threadIdx.x; j < valid; j += kThreads) {
      const float v = load_float(x, xk, row + j);
      top = v > top ? v : top;
    }
    top = block_max(top, max_scratch);
    double part = 0.0;
    for (int64_t j = threadIdx.x; j < valid; j += kThreads)
      part += exp(static_cast<double>(load_float(x, xk, row + j)) - top);
    const double sum = block_sum(part, sum_scratch);
    for (int64_t j = threadIdx.x; j < lk; j += kThreads)
      store_float(
          y, yk, row + j,
          j < valid ? static_cast<float>(exp(static_cast<double>(load_float(x, xk, row + j)) - top) / sum) : 0.0f);
  }
}

__global__ void masked_softmax_backward_kernel(const void* y, ElemKind yk, const void* dy, ElemKind dyk, void* dx,
                                               ElemKind dxk, int64_t rows, int64_t lk) {
  __shared__ double scratch[kThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t row = r * lk;
    double part = 0.0;
    for (int64_t j = threadIdx.x; j < lk; j += kThreads)
      part += static_cast<double>(load_float(dy, dyk, row + j)) * load_float(y, yk, row + j);
    const double dot = block_sum(part, scratch);
    for (int64_t j = threadIdx.x; j < lk; j += kThreads)
      store_float(dx, dxk, row + j,
                  static_cast<float>(load_float(y, yk, row + j) * (load_float(dy, dyk, row + j) - dot)));
  }
}

}  // namespace

void masked_softmax_forward(Context& ctx, const SoftmaxMask& mask, const Tensor& x, const Tensor& key_lengths,
                            Tensor& y) {
  const int64_t lk = x.dim(3), rows = x.numel() / lk;
  if (rows == 0) return;
  masked_softmax_forward_kernel<<<row_blocks(rows), kThreads, 0, scaletrain::cuda::compute_stream(ctx)>>>(
      x.raw(), elem_kind(x, "masked_softmax_forward x"), static_cast<const int32_t*>(key_lengths.raw()), y.raw(),
      elem_kind(y, "masked_softmax_forward y"), rows, x.dim(1), x.dim(2), lk, mask.causal);
  ST_CHECK_LAUNCH();
}

void masked_softmax_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx) {
  const int64_t lk = y.dim(3), rows = y.numel() / lk;
  if (rows == 0) return;
  masked_softmax_backward_kernel<<<row_blocks(rows), kThreads, 0, scaletrain::cuda::compute_stream(ctx)>>>(
      y.raw(), elem_kind(y, "masked_softmax_backward y"), dy.raw(), elem_kind(dy, "masked_softmax_backward dy"),
      dx.raw(), elem_kind(dx, "masked_softmax_backward dx"), rows, lk);
  ST_CHECK_LAUNCH();
}

}  // namespace scaletrain::ops::cuda
