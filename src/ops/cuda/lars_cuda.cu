// CUDA LARS passes. Sums of squares: one block per chunk, each thread a strided share of the
// chunk in double, then a tree in shared memory: a fixed order (deterministic), another than the
// CPU's sequential sum, so the sums differ from the CPU's in rounding only. The update: one
// grid-stride pass over the chunks' elements, the CPU's float arithmetic in its order with
// IEEE-rounded intrinsics (no FMA), each element finding its chunk by a binary search over the
// chunk starts. The per-chunk lists travel to the device with each call (a few KB for ResNet-50).
#include <vector>

#include "backend/cuda/cuda_context.hpp"
#include "ops/cuda/grid_stride.cuh"
#include "scaletrain/ops/lars.hpp"

namespace scaletrain::ops::cuda {
namespace {

using scaletrain::cuda::kThreadsPerBlock;

std::size_t aligned(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

__global__ void sums_of_squares_kernel(const float* w, const float* g, const LarsChunk* chunks, double* w_sq,
                                       double* g_sq) {
  __shared__ double ws[kThreadsPerBlock];
  __shared__ double gs[kThreadsPerBlock];
  const LarsChunk c = chunks[blockIdx.x];
  const int t = threadIdx.x;
  double a = 0.0, b = 0.0;
  for (int64_t i = c.begin + t; i < c.end; i += kThreadsPerBlock) {
    a += static_cast<double>(w[i]) * w[i];
    b += static_cast<double>(g[i]) * g[i];
  }
  ws[t] = a;
  gs[t] = b;
  __syncthreads();
  for (int half = kThreadsPerBlock / 2; half > 0; half /= 2) {
    if (t < half) {
      ws[t] += ws[t + half];
      gs[t] += gs[t + half];
    }
    __syncthreads();
  }
  if (t == 0) {
    w_sq[blockIdx.x] = ws[0];
    g_sq[blockIdx.x] = gs[0];
  }
}

// The chunk holding element i (chunks sorted by begin; elements outside every chunk are not touched).
__device__ int find_chunk(const LarsChunk* chunks, int count, int64_t i) {
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (chunks[mid].begin <= i)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

__global__ void lars_update_kernel(const LarsChunk* chunks, int count, const float* scaled_lr,
                                   const float* weight_decay, float mu, float* w, const float* g, float* v,
                                   int64_t first, int64_t last) {
  for (int64_t i = first + grid_first(); i < last; i += grid_stride()) {
    const int c = find_chunk(chunks, count, i);
    if (i < chunks[c].begin || i >= chunks[c].end) continue;
    const float vi =
        __fadd_rn(__fmul_rn(mu, v[i]), __fmul_rn(scaled_lr[c], __fadd_rn(g[i], __fmul_rn(weight_decay[c], w[i]))));
    v[i] = vi;
    w[i] = __fsub_rn(w[i], vi);
  }
}

// Copies a host list into the scratch at `at` (a synchronous copy from pageable memory).
template <typename T>
T* upload(const std::vector<T>& host, char* at, cudaStream_t stream) {
  ST_CHECK_CUDA(cudaMemcpyAsync(at, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice, stream));
  return reinterpret_cast<T*>(at);
}

}  // namespace

void lars_sums_of_squares(Context& ctx, const Tensor& w, const Tensor& g, const std::vector<LarsChunk>& chunks,
                          std::vector<double>& w_sq, std::vector<double>& g_sq) {
  const std::size_t count = chunks.size();
  if (count == 0) return;
  cudaStream_t stream = scaletrain::cuda::compute_stream(ctx);
  const std::size_t chunk_bytes = aligned(count * sizeof(LarsChunk)), sum_bytes = aligned(count * sizeof(double));
  char* scratch = static_cast<char*>(scaletrain::cuda::workspace(ctx, chunk_bytes + 2 * sum_bytes));
  const LarsChunk* device_chunks = upload(chunks, scratch, stream);
  auto* dw = reinterpret_cast<double*>(scratch + chunk_bytes);
  auto* dg = reinterpret_cast<double*>(scratch + chunk_bytes + sum_bytes);
  sums_of_squares_kernel<<<static_cast<unsigned>(count), kThreadsPerBlock, 0, stream>>>(
      static_cast<const float*>(w.raw()), static_cast<const float*>(g.raw()), device_chunks, dw, dg);
  ST_CHECK_LAUNCH();
  ST_CHECK_CUDA(cudaMemcpyAsync(w_sq.data(), dw, count * sizeof(double), cudaMemcpyDeviceToHost, stream));
  ST_CHECK_CUDA(cudaMemcpyAsync(g_sq.data(), dg, count * sizeof(double), cudaMemcpyDeviceToHost, stream));
  ST_CHECK_CUDA(cudaStreamSynchronize(stream));
}

void lars_update(Context& ctx, float momentum, const std::vector<LarsChunk>& chunks,
                 const std::vector<float>& scaled_lr, const std::vector<float>& weight_decay, Tensor& w,
                 const Tensor& g, Tensor& v) {
  const std::size_t count = chunks.size();
  if (count == 0) return;
  cudaStream_t stream = scaletrain::cuda::compute_stream(ctx);
  const std::size_t chunk_bytes = aligned(count * sizeof(LarsChunk)), float_bytes = aligned(count * sizeof(float));
  char* scratch = static_cast<char*>(scaletrain::cuda::workspace(ctx, chunk_bytes + 2 * float_bytes));
  const LarsChunk* device_chunks = upload(chunks, scratch, stream);
  const float* lr = upload(scaled_lr, scratch + chunk_bytes, stream);
  const float* wd = upload(weight_decay, scratch + chunk_bytes + float_bytes, stream);
  int64_t first = chunks.front().begin, last = chunks.front().end;
  for (const LarsChunk& c : chunks) first = std::min(first, c.begin), last = std::max(last, c.end);
  if (last <= first) return;
  lars_update_kernel<<<scaletrain::cuda::blocks_for(last - first), kThreadsPerBlock, 0, stream>>>(
      device_chunks, static_cast<int>(count), lr, wd, momentum, static_cast<float*>(w.raw()),
      static_cast<const float*>(g.raw()), static_cast<float*>(v.raw()), first, last);
  ST_CHECK_LAUNCH();
}

}  // namespace scaletrain::ops::cuda
