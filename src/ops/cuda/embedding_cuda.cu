// CUDA embedding lookup and its gradient.
//
// Indices are checked on the device first (a kernel notes the first position outside the table;
// one copy back and a sync), and a bad one is reported in the CPU kernel's words.
//
// Backward without float atomics, so that two GPU runs give the same bits and the GPU the CPU's:
// the positions are sorted by index with CUB's radix sort, which is stable (equal indices keep
// their position order); then each run of equal indices, one thread per column, sums its dout
// rows in position order from zero, as the CPU's loop does, and writes the row. Rows no index
// names stay zero (the table is cleared first). The same float additions in the same order: the
// CPU's bits.
// 16-bit storage (with_half_storage): the table, out, dout and dtable are read and written in
// their own formats (ops/cuda/half_io.cuh); a row sum is still float additions of the widened
// values, stored once.
#include <cub/device/device_radix_sort.cuh>

#include "backend/cuda/cuda_context.hpp"
#include "ops/cuda/grid_stride.cuh"
#include "ops/cuda/half_io.cuh"
#include "scaletrain/core/error.hpp"
#include "scaletrain/ops/embedding.hpp"

namespace scaletrain::ops::cuda {
namespace {

std::size_t aligned(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

__global__ void first_bad_index_kernel(const int32_t* idx, int64_t n, int64_t rows, unsigned long long* first_bad) {
  for (int64_t i = grid_first(); i < n; i += grid_stride())
    if (idx[i] < 0 || idx[i] >= rows) atomicMin(first_bad, static_cast<unsigned long long>(i));
}

// Throws naming the first index outside [0, rows), as the CPU kernel does. One sync.
void check_index_range(Context& ctx, const Tensor& indices, int64_t rows, const char* op) {
  const int64_t n = indices.numel();
  if (n == 0) return;
  cudaStream_t stream = scaletrain::cuda::compute_stream(ctx);
  auto* first_bad = static_cast<unsigned long long*>(scaletrain::cuda::workspace(ctx, sizeof(unsigned long long)));
  ST_CHECK_CUDA(cudaMemsetAsync(first_bad, 0xff, sizeof(unsigned long long), stream));
  const auto* idx = static_cast<const int32_t*>(indices.raw());
  first_bad_index_kernel<<<scaletrain::cuda::blocks_for(n), scaletrain::cuda::kThreadsPerBlock, 0, stream>>>(
      idx, n, rows, first_bad);
  ST_CHECK_LAUNCH();
  unsigned long long bad = 0;
  ST_CHECK_CUDA(cudaMemcpyAsync(&bad, first_bad, sizeof bad, cudaMemcpyDeviceToHost, stream));
  ST_CHECK_CUDA(cudaStreamSynchronize(stream));
  if (bad == ~0ull) return;
  int32_t value = 0;
  ST_CHECK_CUDA(cudaMemcpyAsync(&value, idx + bad, sizeof value, cudaMemcpyDeviceToHost, stream));
  ST_CHECK_CUDA(cudaStreamSynchronize(stream));
  ST_THROW(op << ": index " << value << " at position " << bad << " is outside the table of " << rows << " rows [0, "
              << rows << ")");
}

__global__ void gather_rows_kernel(const void* table, ElemKind tk, const int32_t* idx, void* out, ElemKind ok,
                                   int64_t n, int64_t d) {
  for (int64_t e = grid_first(); e < n * d; e += grid_stride()) {
    const int64_t i = e / d, j = e - i * d;
    store_float(out, ok, e, load_float(table, tk, static_cast<int64_t>(idx[i]) * d + j));
  }
}

__global__ void iota_kernel(int32_t* v, int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) v[i] = static_cast<int32_t>(i);
}

// Element (k, j): where sorted position k starts a run of equal rows, the run's dout rows summed
// in position order into column j of that row.
__global__ void sum_runs_kernel(const int32_t* sorted_rows, const int32_t* positions, const void* dout, ElemKind dk,
                                void* dtable, ElemKind tk, int64_t n, int64_t d) {
  for (int64_t e = grid_first(); e < n * d; e += grid_stride()) {
    const int64_t k = e / d, j = e - k * d;
    const int32_t row = sorted_rows[k];
    if (k > 0 && sorted_rows[k - 1] == row) continue;  // not the run's start
    float sum = 0.0f;
    for (int64_t q = k; q < n && sorted_rows[q] == row; ++q)
      sum = __fadd_rn(sum, load_float(dout, dk, static_cast<int64_t>(positions[q]) * d + j));
    store_float(dtable, tk, static_cast<int64_t>(row) * d + j, sum);
  }
}

}  // namespace

void embedding_forward(Context& ctx, const Tensor& table, const Tensor& indices, Tensor& out) {
  const int64_t n = indices.numel(), d = table.dim(1);
  check_index_range(ctx, indices, table.dim(0), "embedding_forward");
  if (n * d == 0) return;
  gather_rows_kernel<<<scaletrain::cuda::blocks_for(n * d), scaletrain::cuda::kThreadsPerBlock, 0,
                       scaletrain::cuda::compute_stream(ctx)>>>(
      table.raw(), elem_kind(table, "embedding_forward table"), static_cast<const int32_t*>(indices.raw()), out.raw(),
      elem_kind(out, "embedding_forward out"), n, d);
  ST_CHECK_LAUNCH();
}

void embedding_backward(Context& ctx, const Tensor& indices, const Tensor& dout, Tensor& dtable) {
  const int64_t n = indices.numel(), rows = dtable.dim(0), d = dtable.dim(1);
  check_index_range(ctx, indices, rows, "embedding_backward");
  cudaStream_t stream = scaletrain::cuda::compute_stream(ctx);
  ST_CHECK_CUDA(cudaMemsetAsync(dtable.raw(), 0, dtable.bytes(), stream));
  if (n * d == 0) return;
  ST_CHECK(n <= INT32_MAX, "embedding_backward: " << n << " positions exceed the sort's 32-bit positions");
  const int num_items = static_cast<int>(n);
  // The rows are at most 2^31: sort on the bits they use.
  int end_bit = 1;
  while (end_bit < 31 && (int64_t{1} << end_bit) < rows) ++end_bit;
  std::size_t sort_bytes = 0;
  ST_CHECK_CUDA(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, static_cast<const int32_t*>(nullptr),
                                                static_cast<int32_t*>(nullptr), static_cast<const int32_t*>(nullptr),
                                                static_cast<int32_t*>(nullptr), num_items, 0, end_bit, stream));
  const std::size_t ints = aligned(static_cast<std::size_t>(n) * sizeof(int32_t));
  char* scratch = static_cast<char*>(scaletrain::cuda::workspace(ctx, 3 * ints + aligned(sort_bytes)));
  auto* positions = reinterpret_cast<int32_t*>(scratch);
  auto* sorted_rows = reinterpret_cast<int32_t*>(scratch + ints);
  auto* sorted_positions = reinterpret_cast<int32_t*>(scratch + 2 * ints);
  void* sort_temp = scratch + 3 * ints;
  iota_kernel<<<scaletrain::cuda::blocks_for(n), scaletrain::cuda::kThreadsPerBlock, 0, stream>>>(positions, n);
  ST_CHECK_LAUNCH();
  ST_CHECK_CUDA(cub::DeviceRadixSort::SortPairs(sort_temp, sort_bytes, static_cast<const int32_t*>(indices.raw()),
                                                sorted_rows, positions, sorted_positions, num_items, 0, end_bit,
                                                stream));
  sum_runs_kernel<<<scaletrain::cuda::blocks_for(n * d), scaletrain::cuda::kThreadsPerBlock, 0, stream>>>(
      sorted_rows, sorted_positions, dout.raw(), elem_kind(dout, "embedding_backward dout"), dtable.raw(),
      elem_kind(dtable, "embedding_backward dtable"), n, d);
  ST_CHECK_LAUNCH();
}

}  // namespace scaletrain::ops::cuda
