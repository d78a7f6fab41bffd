// conv2d_bn_stats_forward on a GPU (ops/conv2d.hpp): cuDNN's fused graph (cudnn_fusion.hpp) where
// the activations are fp16, the operands aligned and an engine takes the shape; otherwise (bf16
// and fp32 among them) the three steps apart: the prologue kernel into a fresh activation, the convolution op's
// kernel (conv2d_cuda.cu), and the per-channel sums of y. Each shape's plan (or why there is none)
// is made once per GPU and recorded with the convolutions' (report.json device.conv_algorithms,
// direction conv2d_bn_stats_forward).
#include <cuda_runtime.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <tuple>

#include "backend/cuda/cuda_context.hpp"
#include "ops/cuda/cudnn_fusion.hpp"
#include "ops/cuda/grid_stride.cuh"
#include "ops/cuda/half_io.cuh"
#include "ops/op_checks.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/ops/conv2d.hpp"
#include "scaletrain/ops/conv_algorithm.hpp"

namespace scaletrain::ops::cuda {

void conv2d_forward(Context& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y);

namespace {

constexpr std::size_t kMaxFusedWorkspace = std::size_t{256} << 20;  // as the graph-API convolutions
constexpr int64_t kRowsPerChunk = 1024;                             // rows of y per partial sum
constexpr int kChannelsPerBlock = 32, kRowLanes = 8;                // the sums' 256-thread blocks

// ---- the three steps apart ---------------------------------------------------------------------

// a = max(0, x * scale[c] + bias[c]), scale and bias rounded to a's format (as the fused engine
// takes them in fp16), the product and the sum each rounded to fp32 (no FMA: the CPU's reference
// rounds both), stored in a's format.
__global__ void prologue_kernel(const void* x, ElemKind xk, const float* scale, const float* bias, void* a, ElemKind ak,
                                int64_t n, int64_t channels) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) {
    const int64_t c = i % channels;
    const float s = round_to_kind(scale[c], ak), b = round_to_kind(bias[c], ak);
    const float shifted = __fadd_rn(__fmul_rn(load_float(x, xk, i), s), b);
    store_float(a, ak, i, fmaxf(shifted, 0.0f));
  }
}

// The fp32 scale and bias in the data's 16-bit format, for the fused engine.
__global__ void channels_to_half_kernel(const float* scale, const float* bias, void* scale16, void* bias16,
                                        ElemKind kind, int64_t channels) {
  for (int64_t c = grid_first(); c < channels; c += grid_stride()) {
    store_float(scale16, kind, c, scale[c]);
    store_float(bias16, kind, c, bias[c]);
  }
}

// Partial sums of y's (rows, channels) values per chunk of kRowsPerChunk rows, in double and in a
// fixed order: thread (lane, row lane) sums every kRowLanes-th row of the chunk, then the row
// lanes are added in order. partial: (chunks, channels) of sums and of squares.
__global__ void partial_sums_kernel(const void* y, ElemKind yk, int64_t rows, int64_t channels, double* sum,
                                    double* sqsum) {
  __shared__ double s[kRowLanes][kChannelsPerBlock], q[kRowLanes][kChannelsPerBlock];
  const int64_t chunk = blockIdx.x;
  const int64_t c = static_cast<int64_t>(blockIdx.y) * kChannelsPerBlock + threadIdx.x;
  const int64_t first = chunk * kRowsPerChunk, last = min(rows, first + kRowsPerChunk);
  double ls = 0.0, lq = 0.0;
  if (c < channels)
    for (int64_t r = first + threadIdx.y; r < last; r += kRowLanes) {
      const double v = load_float(y, yk, r * channels + c);
      ls += v;
      lq += v * v;
    }
  s[threadIdx.y][threadIdx.x] = ls;
  q[threadIdx.y][threadIdx.x] = lq;
  __syncthreads();
  if (threadIdx.y == 0 && c < channels) {
    for (int k = 1; k < kRowLanes; ++k) ls += s[k][threadIdx.x], lq += q[k][threadIdx.x];
    sum[chunk * channels + c] = ls;
    sqsum[chunk * channels + c] = lq;
  }
}

// The chunks' partial sums added in order, per channel, stored as float.
__global__ void finish_sums_kernel(const double* partial_sum, const double* partial_sqsum, int64_t chunks,
                                   int64_t channels, float* sum, float* sqsum) {
  for (int64_t c = grid_first(); c < channels; c += grid_stride()) {
    double s = 0.0, q = 0.0;
    for (int64_t k = 0; k < chunks; ++k) s += partial_sum[k * channels + c], q += partial_sqsum[k * channels + c];
    sum[c] = static_cast<float>(s);
    sqsum[c] = static_cast<float>(q);
  }
}

void channel_sums(Context& ctx, const Tensor& y, Tensor& sum, Tensor& sqsum) {
  const int64_t channels = y.dim(3), rows = y.numel() / channels;
  if (rows == 0) {
    sum.zero(), sqsum.zero();
    return;
  }
  const int64_t chunks = (rows + kRowsPerChunk - 1) / kRowsPerChunk;
  // Doubles in an i64 tensor of the caching allocator, not workspace(): the convolution took that.
  Tensor partial = Tensor::empty({2, chunks, channels}, DType::i64, Device::cuda);
  double* ps = static_cast<double*>(partial.raw());
  double* pq = ps + chunks * channels;
  const cudaStream_t stream = scaletrain::cuda::compute_stream(ctx);
  const dim3 grid(static_cast<unsigned>(chunks),
                  static_cast<unsigned>((channels + kChannelsPerBlock - 1) / kChannelsPerBlock));
  partial_sums_kernel<<<grid, dim3(kChannelsPerBlock, kRowLanes), 0, stream>>>(
      y.raw(), elem_kind(y, "conv2d_bn_stats_forward: y"), rows, channels, ps, pq);
  ST_CHECK_LAUNCH();
  finish_sums_kernel<<<scaletrain::cuda::blocks_for(channels), scaletrain::cuda::kThreadsPerBlock, 0, stream>>>(
      ps, pq, chunks, channels, sum.data<float>(), sqsum.data<float>());
  ST_CHECK_LAUNCH();
}

// The prologue's output, stored as the activations are (16-bit under a mixed precision: what the
// convolution's tensor cores read), then the convolution, then the sums.
void run_apart(Context& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& scale, const Tensor& bias,
               const Tensor& w, Tensor& y, Tensor& sum, Tensor& sqsum) {
  Tensor input = x;
  if (scale.defined()) {
    input = Tensor::empty(x.shape(), amp_storage_dtype(ctx), Device::cuda);
    const int64_t n = x.numel();
    prologue_kernel<<<scaletrain::cuda::blocks_for(n), scaletrain::cuda::kThreadsPerBlock, 0,
                      scaletrain::cuda::compute_stream(ctx)>>>(
        x.raw(), elem_kind(x, "conv2d_bn_stats_forward: x"), scale.data<float>(), bias.data<float>(), input.raw(),
        elem_kind(input, "conv2d_bn_stats_forward: the prologue"), n, x.dim(3));
    ST_CHECK_LAUNCH();
  }
  cuda::conv2d_forward(ctx, p, input, w, Tensor(), y);
  channel_sums(ctx, y, sum, sqsum);
}

// ---- the fused graph ---------------------------------------------------------------------------

// The OIHW fp32 filter as cuDNN's OHWI filter in the data's 16-bit format, in one pass.
__global__ void filter_to_ohwi_kernel(const float* w, void* out, ElemKind kind, int64_t o, int64_t c, int64_t khw) {
  const int64_t n = o * c * khw;
  for (int64_t i = grid_first(); i < n; i += grid_stride()) {
    // i = ((oo * khw) + k) * c + cc in OHWI; the source is (oo * c + cc) * khw + k.
    const int64_t cc = i % c, k = (i / c) % khw, oo = i / (c * khw);
    store_float(out, kind, i, w[(oo * c + cc) * khw + k]);
  }
}

struct FusedEntry {
  std::unique_ptr<graph::FusedPlan> plan;  // null: the steps apart
  std::string why_not;
};

using FusedKey = std::tuple<int, int, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                            int64_t, int64_t, int64_t, int64_t>;

std::mutex fused_mutex;
std::map<FusedKey, std::shared_ptr<FusedEntry>>& fused_plans() {
  static auto* plans = new std::map<FusedKey, std::shared_ptr<FusedEntry>>;  // never destroyed, as cuDNN's
  return *plans;
}

graph::ConvGeometry geometry_of(const Conv2dParams& p, const Tensor& x, const Tensor& w, const Tensor& y) {
  graph::ConvGeometry g;
  g.n = x.dim(0), g.h = x.dim(1), g.w = x.dim(2), g.c = x.dim(3);
  g.o = w.dim(0), g.kh = w.dim(2), g.kw = w.dim(3), g.oh = y.dim(1), g.ow = y.dim(2);
  g.stride_h = p.stride_h, g.stride_w = p.stride_w, g.pad_h = p.pad_top, g.pad_w = p.pad_left;
  return g;
}

void record(const graph::ConvGeometry& g, const Conv2dParams& p, const char* data, const FusedEntry& e) {
  ConvAlgorithmRecord r;
  r.direction = "conv2d_bn_stats_forward";
  r.n = static_cast<int>(g.n), r.h = static_cast<int>(g.h), r.w = static_cast<int>(g.w), r.c = static_cast<int>(g.c);
  r.o = static_cast<int>(g.o), r.kh = static_cast<int>(g.kh), r.kw = static_cast<int>(g.kw);
  r.stride = p.stride_h, r.padding = p.pad_top, r.stride_w = p.stride_w, r.padding_w = p.pad_left;
  r.data = data;
  r.algo = -1;
  if (e.plan) {
    std::ostringstream os;
    os << "graph (fused; " << e.plan->intermediates << " intermediates; built in " << e.plan->build_seconds << " s)";
    r.chosen_by = os.str();
    r.engine = static_cast<int>(e.plan->engine.global_index);
    r.engine_knobs = e.plan->knobs;
    r.engine_notes = e.plan->engine.notes;
    r.math = e.plan->engine.tensor_core ? ConvMath::tensor_op : ConvMath::fma;
    r.workspace_bytes = e.plan->workspace_bytes;
    r.deterministic = !e.plan->engine.nondeterministic;
  } else {
    r.chosen_by = "apart (no fused engine: " + e.why_not + ")";
  }
  record_conv_algorithm(r);
}

// The shape's fused plan, made (and recorded) on its first call; null where there is none.
const FusedEntry& fused_entry(Context& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& w, const Tensor& y,
                              bool prologue) {
  const graph::ConvGeometry g = geometry_of(p, x, w, y);
  const cudnnDataType_t data = x.dtype() == DType::f16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
  const FusedKey key{ctx.gpu_index(),
                     static_cast<int>(data),
                     prologue,
                     g.n,
                     g.c,
                     g.h,
                     g.w,
                     g.o,
                     g.kh,
                     g.kw,
                     g.stride_h,
                     g.stride_w,
                     g.pad_h,
                     g.pad_w,
                     g.oh};
  std::lock_guard<std::mutex> lock(fused_mutex);
  std::shared_ptr<FusedEntry>& entry = fused_plans()[key];
  if (!entry) {
    entry = std::make_shared<FusedEntry>();
    graph::ConvBnStatsRequest request;
    request.g = g;
    request.data = data;
    request.prologue = prologue;
    request.max_workspace_bytes = kMaxFusedWorkspace;
    if (const char* why = graph::conv_bn_stats_unsupported(ctx.gpu_index(), request)) {
      entry->why_not = why;
    } else {
      graph::FusedPlanResult made = graph::make_conv_bn_stats_plan(ctx, request);
      entry->plan = std::move(made.plan);
      entry->why_not = made.why_not;
    }
    record(g, p, dtype_name(x.dtype()), *entry);
  }
  return *entry;
}

bool aligned(const Tensor& t) { return graph::graph_aligned(t.raw()); }

// Whether the fused graph may run this call: 16-bit activations of the mixed precision's format
// on both sides, every operand aligned as the plans assume.
bool fusable(const Context& ctx, const Tensor& x, const Tensor& scale, const Tensor& y, const Tensor& sum,
             const Tensor& sqsum) {
  // fp16 only: the engine takes no other type (its refusals of shapes and GPUs are fused_entry's).
  if (amp_storage_dtype(ctx) != DType::f16 || x.dtype() != DType::f16 || y.dtype() != DType::f16) return false;
  if (!aligned(x) || !aligned(y) || !aligned(sum) || !aligned(sqsum)) return false;
  return !scale.defined() || aligned(scale);
}

bool run_fused(Context& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& scale, const Tensor& bias,
               const Tensor& w, Tensor& y, Tensor& sum, Tensor& sqsum) {
  if (scale.defined() && !aligned(bias)) return false;
  const FusedEntry& entry = fused_entry(ctx, p, x, w, y, scale.defined());
  if (!entry.plan) return false;
  const graph::FusedPlan& plan = *entry.plan;
  // One scratch block: the OHWI fp16 filter, the fp16 scale and bias, cuDNN's workspace.
  const int64_t w_count = w.numel(), channels = x.dim(3);
  auto rounded_up = [](int64_t elements) { return (std::size_t(elements) * 2 + 255) / 256 * 256; };
  const std::size_t w_bytes = rounded_up(w_count), c_bytes = rounded_up(channels);
  char* block = static_cast<char*>(scaletrain::cuda::workspace(ctx, w_bytes + 2 * c_bytes + plan.workspace_bytes));
  char* scale16 = block + w_bytes;
  char* bias16 = scale16 + c_bytes;
  const cudaStream_t stream = scaletrain::cuda::compute_stream(ctx);
  const ElemKind kind = elem_kind(x, "conv2d_bn_stats_forward: x");
  filter_to_ohwi_kernel<<<scaletrain::cuda::blocks_for(w_count), scaletrain::cuda::kThreadsPerBlock, 0, stream>>>(
      w.data<float>(), block, kind, w.dim(0), w.dim(1), w.dim(2) * w.dim(3));
  ST_CHECK_LAUNCH();
  if (scale.defined()) {
    channels_to_half_kernel<<<scaletrain::cuda::blocks_for(channels), scaletrain::cuda::kThreadsPerBlock, 0, stream>>>(
        scale.data<float>(), bias.data<float>(), scale16, bias16, kind, channels);
    ST_CHECK_LAUNCH();
  }
  void* work = plan.workspace_bytes > 0 ? bias16 + c_bytes : nullptr;
  // Zeroed first: genstats is not documented to overwrite rather than add.
  ST_CHECK_CUDA(cudaMemsetAsync(sum.raw(), 0, sum.bytes(), stream));
  ST_CHECK_CUDA(cudaMemsetAsync(sqsum.raw(), 0, sqsum.bytes(), stream));
  const cudnnStatus_t status = graph::execute_conv_bn_stats(
      scaletrain::cuda::cudnn_handle(ctx), plan, x.raw(), scale.defined() ? scale16 : nullptr,
      scale.defined() ? bias16 : nullptr, block, y.raw(), sum.data<float>(), sqsum.data<float>(), work);
  ST_CHECK(status == CUDNN_STATUS_SUCCESS,
           "conv2d_bn_stats_forward: cuDNN could not execute its finalized fused plan (engine "
               << plan.engine.global_index << ", knobs " << plan.knobs << ") for x " << shape_string(x.shape())
               << ", w " << shape_string(w.shape()) << ": " << cudnnGetErrorString(status));
  return true;
}

}  // namespace

void conv2d_bn_stats_forward(Context& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& scale,
                             const Tensor& bias, const Tensor& w, Tensor& y, Tensor& sum, Tensor& sqsum) {
  ST_CHECK(p.symmetric_padding(), "conv2d_bn_stats_forward: cuDNN needs the same padding on both sides");
  if (x.numel() > 0 && fusable(ctx, x, scale, y, sum, sqsum) && run_fused(ctx, p, x, scale, bias, w, y, sum, sqsum))
    return;
  run_apart(ctx, p, x, scale, bias, w, y, sum, sqsum);
}

}  // namespace scaletrain::ops::cuda
