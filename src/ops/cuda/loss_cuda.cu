// CUDA softmax cross-entropy with label smoothing and top-1 counting, computing what the CPU
// kernels (src/ops/cpu/loss_cpu.cpp) compute: each row in double through log-sum-exp, the
// gradient rounded to float per element as there, the first maximum on ties.
// One warp per row: rows are short ((N, K) with K classes, 10 to 1000), so a warp's shuffles
// reduce a row without shared memory or block barriers. The mean loss is a double reduced in a
// fixed order (per-row values, then one block's tree), so it is deterministic; it differs from the
// CPU's sequential sum only in rounding. Returning a host value makes each call a sync point.
// Labels are checked on the device: a label outside [0, K) is skipped by the kernels and the
// first such sample is reported after the copy back, in the CPU kernel's words.
// 16-bit storage (with_half_storage): the logits (and dlogits, kept fp32 by the models) are read
// and written in their own formats (ops/cuda/half_io.cuh), every value computed as before from
// the widened logits and stored once.
#include <cuda/std/limits>

#include "backend/cuda/cuda_context.hpp"
#include "ops/cuda/half_io.cuh"
#include "ops/op_checks.hpp"
#include "scaletrain/ops/loss.hpp"

namespace scaletrain::ops::cuda {
namespace {

using scaletrain::cuda::kThreadsPerBlock;

constexpr int kWarp = 32;
constexpr int kRowsPerBlock = kThreadsPerBlock / kWarp;
constexpr unsigned kFullMask = 0xffffffffu;

// Blocks for one warp per row, capped as blocks_for caps; the row loop strides beyond the cap.
unsigned blocks_for_rows(int64_t n) {
  const int64_t blocks = (n + kRowsPerBlock - 1) / kRowsPerBlock;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65535 ? 65535 : blocks));
}

__device__ inline int64_t first_row() { return blockIdx.x * static_cast<int64_t>(kRowsPerBlock) + threadIdx.x / kWarp; }
__device__ inline int64_t row_stride() { return static_cast<int64_t>(gridDim.x) * kRowsPerBlock; }

__device__ inline double warp_sum(double v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

__device__ inline double warp_max(double v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v = fmax(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

__device__ inline bool label_ok(int32_t label, int64_t k) { return label >= 0 && label < k; }

// No label is ignored (softmax_cross_entropy), or labels equal to `value` are (token_cross_entropy).
struct Ignore {
  bool active;
  int32_t value;
  __device__ bool operator()(int32_t label) const { return active && label == value; }
};

// Per row i: row_loss[i] = (1 - eps) * (lse - x_y) + eps * (lse - mean_k x_k) (0 for a bad
// label), and, when dlogits is given, dlogits[i][j] = (p_j - eps / K) * g_scale, less
// (1 - eps) * g_scale at the label (g_scale: the gradient's scale over N). The whole warp runs each row (the row loop
// bound is the same for its lanes), as the full-mask shuffles need.
__global__ void softmax_xent_rows_kernel(const void* logits, ElemKind xk, const int32_t* labels, void* dlogits,
                                         ElemKind gk, double* row_loss, int64_t n, int64_t k, double eps,
                                         double g_scale, Ignore ignore) {
  const int lane = threadIdx.x % kWarp;
  for (int64_t i = first_row(); i < n; i += row_stride()) {
    const int64_t row = i * k;
    double m = -::cuda::std::numeric_limits<double>::infinity();
    for (int64_t j = lane; j < k; j += kWarp) m = fmax(m, static_cast<double>(load_float(logits, xk, row + j)));
    m = warp_max(m);
    double sum_e = 0.0, sum_x = 0.0;
    for (int64_t j = lane; j < k; j += kWarp) {
      const double v = load_float(logits, xk, row + j);
      sum_e += exp(v - m);
      sum_x += v;
    }
    sum_e = warp_sum(sum_e);
    sum_x = warp_sum(sum_x);
    const int32_t label = labels[i];
    const bool ok = label_ok(label, k) && !ignore(label);
    const double x_label = ok ? static_cast<double>(load_float(logits, xk, row + label)) : 0.0;
    // Every lane has read the row before any writes its gradient, in case dlogits is the logits.
    __syncwarp();
    const double lse = m + log(sum_e);  // -log p_j = lse - x_j
    if (lane == 0) row_loss[i] = ok ? (1.0 - eps) * (lse - x_label) + eps * (lse - sum_x / k) : 0.0;
    if (dlogits != nullptr && ignore(label))  // padding: no gradient
      for (int64_t j = lane; j < k; j += kWarp) store_float(dlogits, gk, row + j, 0.0f);
    if (dlogits != nullptr && ok) {
      const float at_label = static_cast<float>((1.0 - eps) * g_scale);
      for (int64_t j = lane; j < k; j += kWarp) {
        float v = static_cast<float>((exp(load_float(logits, xk, row + j) - m) / sum_e - eps / k) * g_scale);
        if (j == label) v -= at_label;  // in float after rounding, as the CPU does
        store_float(dlogits, gk, row + j, v);
      }
    }
    __syncwarp();  // the next row's reads start after this row's writes
  }
}

// What a loss or count kernel hands back to the host in one copy.
struct LossResult {
  double total;           // sum of the per-row losses
  int64_t tokens;         // rows not ignored
  int64_t first_bad_row;  // the first sample with a label outside [0, K), or -1
};

// One block of kThreadsPerBlock threads: sums the per-row losses (each thread a strided share in
// order, then a tree) and finds the first bad label.
__global__ void softmax_xent_total_kernel(const double* row_loss, const int32_t* labels, int64_t n, int64_t k,
                                          Ignore ignore, LossResult* result) {
  __shared__ double sums[kThreadsPerBlock];
  __shared__ int64_t first_bad[kThreadsPerBlock];
  __shared__ int64_t tokens[kThreadsPerBlock];
  const int t = threadIdx.x;
  double sum = 0.0;
  int64_t bad = n, count = 0;
  for (int64_t i = t; i < n; i += kThreadsPerBlock) {
    sum += row_loss[i];
    const bool ignored = ignore(labels[i]);
    count += ignored ? 0 : 1;
    if (bad == n && !ignored && !label_ok(labels[i], k)) bad = i;  // i rises: the first found is this thread's first
  }
  sums[t] = sum;
  first_bad[t] = bad;
  tokens[t] = count;
  __syncthreads();
  for (int half = kThreadsPerBlock / 2; half > 0; half /= 2) {
    if (t < half) {
      sums[t] += sums[t + half];
      tokens[t] += tokens[t + half];
      if (first_bad[t + half] < first_bad[t]) first_bad[t] = first_bad[t + half];
    }
    __syncthreads();
  }
  if (t == 0) {
    result->total = sums[0];
    result->tokens = tokens[0];
    result->first_bad_row = first_bad[0] < n ? first_bad[0] : -1;
  }
}

// count[0] += rows whose first maximum is at the label; count[1] = min(count[1], first bad row).
// The warp finds the row's first maximum as the CPU's scan does: a NaN at column 0 stays the
// maximum (nothing compares greater), a NaN elsewhere never becomes it, so the answer is column 0
// when it is NaN and otherwise the first largest of the non-NaN values. Integer atomics: the sums
// are exact, so the result is deterministic.
__global__ void count_correct_kernel(const void* logits, ElemKind xk, const int32_t* labels, int64_t n, int64_t k,
                                     unsigned long long* count) {
  const int lane = threadIdx.x % kWarp;
  unsigned long long correct = 0;
  for (int64_t i = first_row(); i < n; i += row_stride()) {
    const int64_t row = i * k;
    float best = 0.0f;
    int64_t best_j = -1;  // -1: no non-NaN value seen yet
    for (int64_t j = lane; j < k; j += kWarp) {
      const float v = load_float(logits, xk, row + j);
      if (v == v && (best_j < 0 || v > best)) {  // strict: this lane's first maximum wins its ties
        best = v;
        best_j = j;
      }
    }
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
      const float other = __shfl_xor_sync(kFullMask, best, offset);
      const int64_t other_j = __shfl_xor_sync(kFullMask, best_j, offset);
      if (other_j >= 0 && (best_j < 0 || other > best || (other == best && other_j < best_j))) {
        best = other;
        best_j = other_j;
      }
    }
    if (lane == 0) {
      const float first = load_float(logits, xk, row);
      if (first != first || best_j < 0) best_j = 0;
      const int32_t label = labels[i];
      if (!label_ok(label, k))
        atomicMin(&count[1], static_cast<unsigned long long>(i));
      else if (best_j == label)
        ++correct;
    }
  }
  if (lane == 0 && correct > 0) atomicAdd(&count[0], correct);
}

// The label of sample `row`, read back for the error message.
int32_t label_at(const Tensor& labels, int64_t row, cudaStream_t stream) {
  int32_t label = 0;
  ST_CHECK_CUDA(cudaMemcpyAsync(&label, static_cast<const int32_t*>(labels.raw()) + row, sizeof label,
                                cudaMemcpyDeviceToHost, stream));
  ST_CHECK_CUDA(cudaStreamSynchronize(stream));
  return label;
}

}  // namespace

namespace {

// The per-row losses and their fixed-order sum (scaletrain::ops::cuda's two kernels), copied back;
// a label outside [0, K) that is not ignored is reported in the CPU kernel's words.
LossResult cross_entropy_rows(Context& ctx, const Tensor& logits, const Tensor& labels, double eps, Ignore ignore,
                              double g_scale, Tensor& dlogits, const char* op) {
  const int64_t n = logits.dim(0), k = logits.dim(1);
  cudaStream_t stream = scaletrain::cuda::compute_stream(ctx);
  // Scratch: the result first (aligned by the allocator), then the per-row losses.
  constexpr std::size_t kResultBytes = 64;
  static_assert(sizeof(LossResult) <= kResultBytes, "LossResult outgrew its slot");
  char* scratch =
      static_cast<char*>(scaletrain::cuda::workspace(ctx, kResultBytes + static_cast<std::size_t>(n) * sizeof(double)));
  auto* result = reinterpret_cast<LossResult*>(scratch);
  auto* row_loss = reinterpret_cast<double*>(scratch + kResultBytes);
  const auto* y = static_cast<const int32_t*>(labels.raw());
  void* dx = dlogits.defined() ? dlogits.raw() : nullptr;
  const ElemKind gk = dlogits.defined() ? elem_kind(dlogits, op) : ElemKind::f32;
  softmax_xent_rows_kernel<<<blocks_for_rows(n), kThreadsPerBlock, 0, stream>>>(
      logits.raw(), elem_kind(logits, op), y, dx, gk, row_loss, n, k, eps, g_scale, ignore);
  ST_CHECK_LAUNCH();
  softmax_xent_total_kernel<<<1, kThreadsPerBlock, 0, stream>>>(row_loss, y, n, k, ignore, result);
  ST_CHECK_LAUNCH();
  LossResult host{};
  ST_CHECK_CUDA(cudaMemcpyAsync(&host, result, sizeof host, cudaMemcpyDeviceToHost, stream));
  ST_CHECK_CUDA(cudaStreamSynchronize(stream));
  if (host.first_bad_row >= 0)
    throw_label_out_of_range(op, host.first_bad_row, label_at(labels, host.first_bad_row, stream), k);
  return host;
}

}  // namespace

double softmax_cross_entropy(Context& ctx, const Tensor& logits, const Tensor& labels, float label_smoothing,
                             Tensor& dlogits, double grad_scale) {
  const double eps = label_smoothing;  // the smoothing in double, as every sum here
  const double inv_n = 1.0 / static_cast<double>(logits.dim(0));
  return cross_entropy_rows(ctx, logits, labels, eps, Ignore{false, 0}, grad_scale * inv_n, dlogits,
                            "softmax_cross_entropy")
             .total *
         inv_n;
}

TokenLoss token_cross_entropy(Context& ctx, const Tensor& logits, const Tensor& labels, float label_smoothing,
                              int32_t ignore_index, double normaliser, Tensor& dlogits) {
  const LossResult r = cross_entropy_rows(ctx, logits, labels, label_smoothing, Ignore{true, ignore_index},
                                          1.0 / normaliser, dlogits, "token_cross_entropy");
  return {r.total, r.tokens};
}

int64_t count_correct(Context& ctx, const Tensor& logits, const Tensor& labels) {
  const int64_t n = logits.dim(0), k = logits.dim(1);
  if (n == 0) return 0;
  cudaStream_t stream = scaletrain::cuda::compute_stream(ctx);
  auto* count = static_cast<unsigned long long*>(scaletrain::cuda::workspace(ctx, 2 * sizeof(unsigned long long)));
  ST_CHECK_CUDA(cudaMemsetAsync(count, 0, sizeof(unsigned long long), stream));
  ST_CHECK_CUDA(cudaMemsetAsync(count + 1, 0xff, sizeof(unsigned long long), stream));  // no bad row: the maximum
  count_correct_kernel<<<blocks_for_rows(n), kThreadsPerBlock, 0, stream>>>(
      logits.raw(), elem_kind(logits, "count_correct"), static_cast<const int32_t*>(labels.raw()), n, k, count);
  ST_CHECK_LAUNCH();
  unsigned long long host[2] = {0, 0};
  ST_CHECK_CUDA(cudaMemcpyAsync(host, count, sizeof host, cudaMemcpyDeviceToHost, stream));
  ST_CHECK_CUDA(cudaStreamSynchronize(stream));
  if (host[1] != ~0ull) {
    const auto row = static_cast<int64_t>(host[1]);
    throw_label_out_of_range("count_correct", row, label_at(labels, row, stream), k);
  }
  return static_cast<int64_t>(host[0]);
}

}  // namespace scaletrain::ops::cuda
