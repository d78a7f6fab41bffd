// CUDA binary cross-entropy on logits, computing what the CPU kernel computes: each sample's loss
// and gradient in double, the gradient rounded once to float. The mean is reduced in a fixed
// order (per-sample values, then one block's strided sums and tree), so it is deterministic; it
// differs from the CPU's chunked sum only in rounding. Returning a host value makes each call a
// sync point, as the softmax loss's. 16-bit storage (with_half_storage): logits, targets and
// dlogits are read and written in their own formats (ops/cuda/half_io.cuh), computed as before
// from the widened values and stored once.
#include "backend/cuda/cuda_context.hpp"
#include "ops/cuda/grid_stride.cuh"
#include "ops/cuda/half_io.cuh"
#include "scaletrain/ops/sigmoid_bce.hpp"

namespace scaletrain::ops::cuda {
namespace {

using scaletrain::cuda::kThreadsPerBlock;

__device__ inline double stable_sigmoid(double x) {
  if (x >= 0) return 1.0 / (1.0 + exp(-x));
  const double e = exp(x);
  return e / (1.0 + e);
}

__global__ void bce_samples_kernel(const void* x, ElemKind xk, const void* y, ElemKind yk, void* dx, ElemKind dxk,
                                   double* loss, int64_t n, double dx_scale) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) {
    const double xi = load_float(x, xk, i), yi = load_float(y, yk, i);
    loss[i] = fmax(xi, 0.0) - xi * yi + log1p(exp(-fabs(xi)));
    if (dx) store_float(dx, dxk, i, static_cast<float>((stable_sigmoid(xi) - yi) * dx_scale));
  }
}

__global__ void bce_total_kernel(const double* loss, int64_t n, double* total) {
  __shared__ double sums[kThreadsPerBlock];
  const int t = threadIdx.x;
  double sum = 0.0;
  for (int64_t i = t; i < n; i += kThreadsPerBlock) sum += loss[i];
  sums[t] = sum;
  __syncthreads();
  for (int half = kThreadsPerBlock / 2; half > 0; half /= 2) {
    if (t < half) sums[t] += sums[t + half];
    __syncthreads();
  }
  if (t == 0) *total = sums[0];
}

}  // namespace

double sigmoid_bce_with_logits(Context& ctx, const Tensor& logits, const Tensor& targets, Tensor& dlogits,
                               double grad_scale) {
  const int64_t n = logits.numel();
  const double inv_n = 1.0 / static_cast<double>(n);
  cudaStream_t stream = scaletrain::cuda::compute_stream(ctx);
  constexpr std::size_t kTotalBytes = 64;  // the total first (aligned by the allocator), then the samples' losses
  char* scratch =
      static_cast<char*>(scaletrain::cuda::workspace(ctx, kTotalBytes + static_cast<std::size_t>(n) * sizeof(double)));
  auto* total = reinterpret_cast<double*>(scratch);
  auto* loss = reinterpret_cast<double*>(scratch + kTotalBytes);
  const char* op = "sigmoid_bce_with_logits";
  void* dx = dlogits.defined() ? dlogits.raw() : nullptr;
  const ElemKind dxk = dlogits.defined() ? elem_kind(dlogits, op) : ElemKind::f32;
  bce_samples_kernel<<<scaletrain::cuda::blocks_for(n), kThreadsPerBlock, 0, stream>>>(
      logits.raw(), elem_kind(logits, op), targets.raw(), elem_kind(targets, op), dx, dxk, loss, n, grad_scale * inv_n);
  ST_CHECK_LAUNCH();
  bce_total_kernel<<<1, kThreadsPerBlock, 0, stream>>>(loss, n, total);
  ST_CHECK_LAUNCH();
  double host = 0.0;
  ST_CHECK_CUDA(cudaMemcpyAsync(&host, total, sizeof host, cudaMemcpyDeviceToHost, stream));
  ST_CHECK_CUDA(cudaStreamSynchronize(stream));
  return host * inv_n;
}

}  // namespace scaletrain::ops::cuda
