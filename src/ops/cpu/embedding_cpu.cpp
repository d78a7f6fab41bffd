// CPU embedding lookup and its gradient.
//
// Forward copies rows, split statically over the threads by position.
//
// Backward is a scatter-add where many positions may name the same row (NCF's popular items
// appear thousands of times in a batch). Rather than atomics, whose order of addition (and so
// the float result) depends on thread timing, every thread owns a contiguous range of table rows
// and scans all N indices in position order, adding only the rows it owns. Each row's sum is
// then formed in position order whatever the thread count: the same bits as the serial loop, so
// ranks with the same data stay bit-identical. The cost is N index reads per thread, small next
// to the N * D additions. The gradient is written over the whole table (zeroed first), as every
// other op's parameter gradient is.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "scaletrain/core/error.hpp"
#include "scaletrain/ops/embedding.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace scaletrain::ops::cpu {
namespace {

constexpr int64_t kParallelMin = 1 << 15;  // elements moved; below this a thread team costs more than it saves

// Every index in [0, rows): the first one outside is reported with its position.
void check_index_range(const Tensor& indices, int64_t rows, const char* op) {
  const int32_t* idx = indices.data<int32_t>();
  const int64_t n = indices.numel();
  for (int64_t i = 0; i < n; ++i)
    ST_CHECK(idx[i] >= 0 && idx[i] < rows, op << ": index " << idx[i] << " at position " << i
                                              << " is outside the table of " << rows << " rows [0, " << rows << ")");
}

// The rows [begin, end) that thread t of `threads` owns.
void owned_rows(int64_t rows, int t, int threads, int64_t& begin, int64_t& end) {
  const int64_t per = rows / threads, extra = rows % threads;
  begin = t * per + std::min<int64_t>(t, extra);
  end = begin + per + (t < extra ? 1 : 0);
}

}  // namespace

void embedding_forward(Context& ctx, const Tensor& table, const Tensor& indices, Tensor& out) {
  const int64_t n = indices.numel(), d = table.dim(1);
  check_index_range(indices, table.dim(0), "embedding_forward");
  const int32_t* idx = indices.data<int32_t>();
  const float* src = table.data<float>();
  float* dst = out.data<float>();
#pragma omp parallel for schedule(static) if (n * d >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * d, src + static_cast<int64_t>(idx[i]) * d, d * sizeof(float));
}

void embedding_backward(Context& ctx, const Tensor& indices, const Tensor& dout, Tensor& dtable) {
  const int64_t n = indices.numel(), rows = dtable.dim(0), d = dtable.dim(1);
  check_index_range(indices, rows, "embedding_backward");
  const int32_t* idx = indices.data<int32_t>();
  const float* g = dout.data<float>();
  float* dt = dtable.data<float>();
  const bool parallel = (n + rows) * d >= kParallelMin;
#pragma omp parallel if (parallel)
  {
    int t = 0, threads = 1;
#ifdef _OPENMP
    t = omp_get_thread_num();
    threads = omp_get_num_threads();
#endif
    int64_t begin = 0, end = 0;
    owned_rows(rows, t, threads, begin, end);
    std::fill(dt + begin * d, dt + end * d, 0.0f);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = idx[i];
      if (r < begin || r >= end) continue;
      float* row = dt + r * d;
      const float* gi = g + i * d;
#pragma omp simd
      for (int64_t j = 0; j < d; ++j) row[j] += gi[j];
    }
  }
}

}  // namespace scaletrain::ops::cpu
