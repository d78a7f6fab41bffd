// CUDA conv2d: cuDNN convolution forward, backward data and backward filter on our channels-last
// activations, with PyTorch's semantics (cross-correlation, dilation 1, a stride and a padding per
// dimension, groups, an optional bias).
//
// Padding: cuDNN's legacy descriptor pads both sides of a dimension equally, as PyTorch's
// padding=(ph, pw) does and as every model here needs. Padding that differs between top and
// bottom or left and right (the op's CPU kernel takes it) is refused with an error naming it.
//
// Groups: cudnnSetConvolutionGroupCount, with the filter described as (O, C/G, KH, KW), the
// per-group input channels. Bias: cudnnAddTensor after the convolution; its gradient
// cudnnConvolutionBackwardBias (a sum of dy over N, H and W per channel).
//
// Layouts. Activations are NHWC (CUDNN_TENSOR_NHWC with logical dims n, c, h, w). Our weights are
// PyTorch's (O, C, KH, KW), i.e. OIHW memory. cuDNN's legacy API documents an NCHW filter beside
// NHWC activations for some forward algorithms only, and the NHWC kernels (the ones it tunes and
// the ones frameworks use: PyTorch and TensorFlow both hand cuDNN an OHWI filter with NHWC data)
// want the filter NHWC as well. So the filter is given to cuDNN as CUDNN_TENSOR_NHWC (OHWI
// memory), transposed from OIHW into scratch each call, and backward filter writes OHWI into
// scratch and transposes it back into dw. Weights are small next to activations, and change every
// step anyway (the CPU backend reorders them each call too). A 1x1 kernel, or C = 1, needs no
// transpose: OIHW and OHWI are then the same memory.
//
// Algorithms: chosen once per (GPU, direction, TF32 or not, shapes, strides, padding, groups) from cuDNN's heuristics
// (cudnnGet*_v7: no trial runs, no memory, the same answer at every start-up) and cached for the
// process with the descriptors: the first algorithm that cuDNN says runs in fp32 (FMA or DEFAULT
// math), within kMaxWorkspaceBytes; backward data and filter prefer a deterministic one
// (choose_conv_algorithm, conv_algorithm.hpp) unless --conv-nondeterministic
// (Context::conv_nondeterministic) lets them take the first (or fastest) of any determinism, as
// PyTorch does by default. Each choice is recorded for report.json.
//
// Math: CUDNN_FMA_MATH, not CUDNN_DEFAULT_MATH: on Ampere and later DEFAULT lets cuDNN run fp32
// convolutions as TF32 on tensor cores, FMA restricts it to fp32 FMA kernels. fp32 means fp32
// here, as on the CPU and in cuBLAS (device_state.cpp), unless the Context allows TF32 (--tf32):
// then DEFAULT, any algorithm's math type, and the descriptor set to the chosen algorithm's.
// cuDNN 9's legacy heuristics may report DEFAULT for an fp32 algorithm: such a result is taken,
// and the descriptor is set to FMA all the same.
//
// Mixed precision (--precision amp-fp16 | amp-bf16): the operands are 16-bit values already (the
// ops before rounded them, docs/mixed-precision.md), so each is copied into the 16-bit format
// (exactly) in the op's scratch, cuDNN convolves in that format with fp32 accumulation (compute
// type FLOAT: its PSEUDO_HALF and PSEUDO_BFLOAT16 configurations) on tensor cores, any math type
// its heuristics offer, and the 16-bit result is widened into the fp32 output (exactly). The bias
// is added in fp32 after that, and the dispatch's rounding then rounds the sum a second time: at
// most a unit of the format from the CPU's one rounding of conv + bias, as in PyTorch's cuDNN path.
// With 16-bit storage cuDNN reads x and writes y in the 16-bit format directly (in_plan_format
// below) and the bias is added to y in float, rounded again: the same two roundings.
// A shape for which cuDNN offers no 16-bit algorithm (its bf16 needs compute capability 8.0; odd
// or grouped channel counts may have none) runs in fp32 instead, its plan recorded as f32: after
// the dispatch's rounding the numerics are the same, only the tensor cores are missed.
//
// Choice (--conv-algo): by default the first usable result of cuDNN's heuristics
// (cudnnGetConvolution*Algorithm_v7). With `search` (Context::conv_search) cuDNN times each
// algorithm once per shape (cudnnFindConvolution*Algorithm, which allocates its own buffers and
// runs synchronously, in the step that first meets the shape) and the fastest usable one runs, as
// PyTorch's cudnn.benchmark: the same rule (choose_conv_algorithm) applied to results sorted by
// time. A search that fails (its buffers do not fit beside the caching allocator's, say) falls
// back to the heuristics for that shape, and report.json's `chosen_by` says why.
//
// Graph API (--conv-algo graph | graph-search, Context::conv_graph): each plan also asks cuDNN's
// graph (backend) API for an execution plan of the same convolution (cudnn_graph.hpp: the same
// NHWC x and y, the same OHWI filter, engines from CUDNN_HEUR_MODE_A, else its fallback mode,
// filtered by their numerical notes as the legacy rule filters math types, backward preferring a
// deterministic engine; graph-search times up to 8 of them in the first step that meets the
// shape). The legacy API reaches only the engines behind its algorithm enums; PyTorch's cuDNN path
// takes the graph API's. Where the graph API yields a plan, it runs the shape: operand preparation
// (the transposes, the 16-bit copies, the bias, the result's conversion) is the same, only the
// cudnnConvolution* call becomes cudnnBackendExecute with a variant pack, and the scratch is sized
// for the graph plan's workspace. Where it yields none (any refused step; grouped shapes), the
// shape runs the legacy way and chosen_by says why ("heuristic (graph API: ...)"); with
// graph-search the legacy search then runs, as with --conv-algo search. The legacy descriptors and
// algorithm are built in every case: the fallback, the unaligned call's path (the graph plan is
// made for 16-byte aligned operands) and the fused epilogue's, which stays legacy. A graph plan
// that fails to execute throws (run_graph_plan says why this is not a fallback). report.json
// records the engine's global index, knobs and numerical notes, and chosen_by graph or
// graph-search.
//
// Fused epilogue (conv2d_bias_relu_forward, --fuse conv-bias-relu): the forward plan's descriptors
// and algorithm with cudnnConvolutionBiasActivationForward, bias and ReLU applied to the fp32
// accumulation before the one rounding; a plan for which cuDNN refuses it runs the two ops.
//
// Every result is overwritten (beta = 0), as the contracts say; cuDNN does not read the output
// when beta is 0. The exception is conv2d_backward_data_add, whose contract is dx += the input
// gradient: cuDNN blends into dx (beta = 1) where dx is in the plan's format and the legacy API
// runs; elsewhere, or where cuDNN refuses the blend, the gradient is computed apart and added.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cuda/cuda_context.hpp"
#include "ops/cuda/cudnn_graph.hpp"
#include "ops/cuda/cudnn_util.hpp"
#include "ops/cuda/grid_stride.cuh"
#include "ops/cuda/half_gemm.hpp"
#include "ops/cuda/half_io.cuh"
#include "scaletrain/core/log.hpp"
#include "scaletrain/ops/conv2d.hpp"
#include "scaletrain/ops/conv_algorithm.hpp"

namespace scaletrain::ops::cuda {

void relu_forward(Context& ctx, const Tensor& x, Tensor& y);  // activation_cuda.cu: the unfused epilogue
void add_inplace(Context& ctx, Tensor& y, const Tensor& x);   // activation_cuda.cu: backward_data_add's sum

namespace {

// The most scratch one convolution may ask for. An algorithm that wants more (FFT variants can
// want gigabytes) is passed over for the next: activations on a 16 GB V100 leave little room.
constexpr std::size_t kMaxWorkspaceBytes = std::size_t{256} << 20;

enum class Direction { forward, backward_data, backward_filter };

const char* direction_name(Direction d) {
  switch (d) {
    case Direction::forward:
      return "conv2d_forward";
    case Direction::backward_data:
      return "conv2d_backward_data";
    case Direction::backward_filter:
      return "conv2d_backward_filter";
  }
  return "conv2d";
}

// Sizes of one convolution, checked into cuDNN's int. x: (N, H, W, C); w: (O, C / groups, KH, KW).
struct ConvDims {
  int n, h, w, c, o, kh, kw, oh, ow, stride_h, stride_w, pad_h, pad_w, groups;

  auto tie() const { return std::tie(n, h, w, c, o, kh, kw, oh, ow, stride_h, stride_w, pad_h, pad_w, groups); }
  int group_channels() const { return c / groups; }  // the filter's input channels
};

// Refused on every call, the empty ones included, so that a model fails alike at any batch size.
void require_symmetric_padding(const Conv2dParams& p, const char* op) {
  ST_CHECK(p.symmetric_padding(), op << ": cuDNN pads both sides of a dimension equally, got padding top " << p.pad_top
                                     << ", bottom " << p.pad_bottom << ", left " << p.pad_left << ", right "
                                     << p.pad_right << " (per-side padding runs on the CPU only)");
}

ConvDims conv_dims(const Conv2dParams& p, const Shape& x, const Shape& w, const char* op) {
  ConvDims d{};
  d.n = to_int(x[0], op, "batch"), d.h = to_int(x[1], op, "height"), d.w = to_int(x[2], op, "width");
  d.c = to_int(x[3], op, "channels");
  d.o = to_int(w[0], op, "output channels"), d.kh = to_int(w[2], op, "kernel height");
  d.kw = to_int(w[3], op, "kernel width");
  d.stride_h = p.stride_h, d.stride_w = p.stride_w, d.pad_h = p.pad_top, d.pad_w = p.pad_left;
  d.groups = p.groups;
  d.oh = (d.h + 2 * d.pad_h - d.kh) / d.stride_h + 1;
  d.ow = (d.w + 2 * d.pad_w - d.kw) / d.stride_w + 1;
  // cuDNN's legacy kernels index with int: the largest tensor must fit.
  to_int(x[0] * x[1] * x[2] * x[3], op, "input elements");
  to_int(int64_t{d.n} * d.oh * d.ow * d.o, op, "output elements");
  return d;
}

// OIHW and OHWI differ only when both the filter's channels (C / groups) and KH*KW exceed 1.
bool needs_transpose(const ConvDims& d) { return d.group_channels() > 1 && d.kh * d.kw > 1; }

// The operands' format: fp32, or a mixed precision's 16-bit format.
struct ConvData {
  std::optional<HalfFormat> half;  // none: fp32
  cudnnDataType_t type() const {
    if (!half) return CUDNN_DATA_FLOAT;
    return *half == HalfFormat::fp16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
  }
  const char* name() const { return !half ? "f32" : *half == HalfFormat::fp16 ? "f16" : "bf16"; }
  // Bytes of a 16-bit copy of `count` elements in the scratch (none in fp32).
  std::size_t copy_bytes(int64_t count) const { return half ? align_scratch(std::size_t(count) * 2) : 0; }
};

ConvData conv_data(const Context& ctx) { return {storage_format(ctx.precision())}; }

struct PlanKey {
  int gpu;
  Direction direction;
  bool tf32;              // the Context allows TF32 (--tf32): another math type, other algorithms
  bool search;            // --conv-algo search: chosen by timing, not by heuristics
  bool graph;             // --conv-algo graph*: the graph API's engines, never mixed with legacy-only plans
  bool nondeterministic;  // --conv-nondeterministic: backward need not prefer deterministic algorithms
  int data;               // the operands' cudnnDataType_t
  ConvDims dims;
  bool operator<(const PlanKey& o) const {
    return std::tuple_cat(std::tie(gpu, direction, tf32, search, graph, nondeterministic, data), dims.tie()) <
           std::tuple_cat(std::tie(o.gpu, o.direction, o.tf32, o.search, o.graph, o.nondeterministic, o.data),
                          o.dims.tie());
  }
};

// Descriptors and the chosen algorithm for one key. Immutable once built, so the cache hands out
// references without holding its lock while the convolution runs.
struct ConvPlan {
  ConvData data;    // what the descriptors take: the precision's 16-bit format, or fp32 (fallback)
  TensorDesc x, y;  // x: input (dx for backward data), y: output (dy for the backward passes)
  FilterDesc w;     // the OHWI filter (dw for backward filter)
  ConvDesc conv;
  int algo = 0;                   // a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t, per the key's direction
  ConvMath math = ConvMath::fma;  // the descriptor's math type
  bool deterministic = false;
  std::size_t workspace_bytes = 0;      // the legacy algorithm's (also the fused epilogue's)
  std::string chosen_by = "heuristic";  // or "search", or why a search or the graph API fell back
  ConvSearchTimes search;               // a search's times: the chosen algorithm's and the fastest's
  // --conv-algo graph | graph-search: the graph API's plan, which runs the shape; the legacy
  // descriptors and algorithm above stay as its fallback and for the fused epilogue.
  std::unique_ptr<graph::GraphPlan> graph;
  mutable std::atomic<bool> warned_unaligned{false};  // the legacy call ran a call the graph plan could not

  // The workspace a call may need: the graph plan's, or the legacy algorithm's when a call's
  // operands are not aligned for the graph plan and the legacy call runs it instead.
  std::size_t scratch_workspace_bytes() const {
    return graph ? std::max(graph->workspace_bytes, workspace_bytes) : workspace_bytes;
  }
};

// cuDNN's heuristic results as plain candidates for choose_conv_algorithm (conv_algorithm.hpp,
// where the rule is written and unit-tested): fp32 takes FMA or DEFAULT results and sets FMA on
// the descriptor; --tf32 takes any. Backward data and filter prefer a deterministic algorithm.
// `timed`: the results of a search (cudnnFind*), whose time each carries; heuristic results carry
// none.
template <typename Perf>
std::vector<ConvCandidate> candidates_of(const std::vector<Perf>& results, int count, bool timed) {
  std::vector<ConvCandidate> candidates;
  for (int i = 0; i < count; ++i) {
    const Perf& r = results[i];
    candidates.push_back({static_cast<int>(r.algo), r.status == CUDNN_STATUS_SUCCESS, static_cast<ConvMath>(r.mathType),
                          r.memory, r.determinism == CUDNN_DETERMINISTIC, timed ? r.time : -1.0f});
  }
  return candidates;
}

template <typename Perf>
[[noreturn]] void throw_no_algorithm(Direction dir, const ConvDims& d, const std::vector<Perf>& results, int count) {
  std::ostringstream os;
  for (int i = 0; i < count; ++i)
    os << (i ? ", " : "") << "algo " << static_cast<int>(results[i].algo) << ": "
       << cudnnGetErrorString(results[i].status) << " math "
       << conv_math_name(static_cast<ConvMath>(results[i].mathType)) << " " << results[i].memory << " bytes";
  ST_THROW(direction_name(dir) << ": cuDNN offers no usable algorithm for input (" << d.n << ", " << d.h << ", " << d.w
                               << ", " << d.c << "), weight (" << d.o << ", " << d.group_channels() << ", " << d.kh
                               << ", " << d.kw << "), stride " << d.stride_h << "x" << d.stride_w << ", padding "
                               << d.pad_h << "x" << d.pad_w << ", groups " << d.groups << " within "
                               << (kMaxWorkspaceBytes >> 20) << " MiB of workspace (" << os.str() << ")");
}

// Takes the chosen heuristic result into the plan: its algorithm, and the math type on the
// convolution descriptor (set before the workspace size is asked for, which depends on it).
template <typename Perf>
const Perf& adopt_algorithm(ConvPlan& plan, Direction dir, const ConvDims& d, const std::vector<Perf>& results,
                            int count, bool prefer_deterministic, bool tf32, bool timed) {
  const std::vector<ConvCandidate> candidates = candidates_of(results, count, timed);
  const ConvChoice choice = choose_conv_algorithm(candidates, prefer_deterministic, tf32, kMaxWorkspaceBytes);
  if (choice.index < 0) throw_no_algorithm(dir, d, results, count);
  plan.search = conv_search_times(candidates, choice, tf32, kMaxWorkspaceBytes);
  const Perf& chosen = results[choice.index];
  plan.algo = chosen.algo;
  plan.math = choice.descriptor_math;
  plan.deterministic = chosen.determinism == CUDNN_DETERMINISTIC;
  ST_CHECK_CUDNN(cudnnSetConvolutionMathType(plan.conv.get(), static_cast<cudnnMathType_t>(choice.descriptor_math)));
  return chosen;
}

// The graph plan's engine in the record: algo -1, the engine's index, knobs and notes.
void record_graph_engine(const graph::GraphPlan& g, ConvAlgorithmRecord& r) {
  r.algo = -1;
  r.math = g.engine.tensor_core ? ConvMath::tensor_op : ConvMath::fma;
  r.workspace_bytes = g.workspace_bytes;
  r.deterministic = !g.engine.nondeterministic;
  r.chosen_by = g.chosen_by;
  r.search = g.search;
  r.engine = static_cast<int>(g.engine.global_index);
  r.engine_knobs = g.knobs;
  r.engine_notes = g.engine.notes;
}

// The plan's choice, for report.json (device.conv_algorithms): what cuDNN picked per shape.
void record_plan(const ConvPlan& plan, Direction dir, const ConvDims& d, bool tf32, const ConvData& data) {
  ConvAlgorithmRecord r;
  r.direction = direction_name(dir);
  r.n = d.n, r.h = d.h, r.w = d.w, r.c = d.c, r.o = d.o, r.kh = d.kh, r.kw = d.kw;
  r.stride = d.stride_h, r.stride_w = d.stride_w, r.padding = d.pad_h, r.padding_w = d.pad_w, r.groups = d.groups;
  r.tf32 = tf32;
  r.data = data.name();
  r.algo = plan.algo;
  r.math = plan.math;
  r.workspace_bytes = plan.workspace_bytes;
  r.deterministic = plan.deterministic;
  r.chosen_by = plan.chosen_by;
  r.search = plan.search;
  if (plan.graph) record_graph_engine(*plan.graph, r);
  record_conv_algorithm(r);
}

// The plan's algorithm from a search (`find`: cudnnFind*, its results sorted by time) where asked
// and one of its results is usable, else from the heuristics (`heuristics`: cudnnGet*_v7); the
// plan notes which, and why a search was not used. Both fill `results` and the count.
template <typename Perf, typename Find, typename Heuristics>
const Perf& choose_algorithm(ConvPlan& plan, Direction dir, const ConvDims& d, std::vector<Perf>& results, bool search,
                             bool prefer_deterministic, bool any_math, Find find, Heuristics heuristics) {
  int count = 0;
  if (search) {
    const cudnnStatus_t status = find(results.data(), &count);
    // The search allocates its own buffers: one that did not fit may leave the runtime's last
    // error set, which the next launch check would report as that launch's.
    (void)cudaGetLastError();
    if (status != CUDNN_STATUS_SUCCESS) {
      plan.chosen_by = std::string("heuristic (the search failed: ") + cudnnGetErrorString(status) + ")";
    } else if (choose_conv_algorithm(candidates_of(results, count, true), prefer_deterministic, any_math,
                                     kMaxWorkspaceBytes)
                   .index < 0) {
      plan.chosen_by = "heuristic (the search found no usable algorithm)";
    } else {
      plan.chosen_by = "search";
      return adopt_algorithm(plan, dir, d, results, count, prefer_deterministic, any_math, true);
    }
  }
  ST_CHECK_CUDNN(heuristics(results.data(), &count));
  return adopt_algorithm(plan, dir, d, results, count, prefer_deterministic, any_math, false);
}

// In a 16-bit format any math type is usable (tensor cores are the point), as with --tf32.
// `deterministic_backward`: backward data and filter prefer a deterministic algorithm (the default;
// --conv-nondeterministic lifts it).
std::unique_ptr<ConvPlan> make_plan(cudnnHandle_t handle, Direction dir, const ConvDims& d, bool tf32, bool search,
                                    bool deterministic_backward, const ConvData& data) {
  auto plan = std::make_unique<ConvPlan>();
  plan->data = data;
  const cudnnDataType_t type = data.type();
  plan->x.set(CUDNN_TENSOR_NHWC, d.n, d.c, d.h, d.w, type);
  plan->y.set(CUDNN_TENSOR_NHWC, d.n, d.o, d.oh, d.ow, type);
  plan->w.set(CUDNN_TENSOR_NHWC, d.o, d.group_channels(), d.kh, d.kw, type);
  // PyTorch's convolution is a cross-correlation (the kernel is not flipped); accumulation in fp32.
  ST_CHECK_CUDNN(cudnnSetConvolution2dDescriptor(plan->conv.get(), d.pad_h, d.pad_w, d.stride_h, d.stride_w, 1, 1,
                                                 CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  ST_CHECK_CUDNN(cudnnSetConvolutionGroupCount(plan->conv.get(), d.groups));
  const bool any_math = tf32 || data.half.has_value();
  ST_CHECK_CUDNN(cudnnSetConvolutionMathType(plan->conv.get(), data.half ? CUDNN_TENSOR_OP_MATH
                                                               : tf32    ? CUDNN_DEFAULT_MATH
                                                                         : CUDNN_FMA_MATH));

  int max_count = 0;
  switch (dir) {
    case Direction::forward: {
      ST_CHECK_CUDNN(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &max_count));
      std::vector<cudnnConvolutionFwdAlgoPerf_t> results(max_count);
      const auto& chosen = choose_algorithm(
          *plan, dir, d, results, search, false, any_math,
          [&](cudnnConvolutionFwdAlgoPerf_t* r, int* count) {
            return cudnnFindConvolutionForwardAlgorithm(handle, plan->x.get(), plan->w.get(), plan->conv.get(),
                                                        plan->y.get(), max_count, count, r);
          },
          [&](cudnnConvolutionFwdAlgoPerf_t* r, int* count) {
            return cudnnGetConvolutionForwardAlgorithm_v7(handle, plan->x.get(), plan->w.get(), plan->conv.get(),
                                                          plan->y.get(), max_count, count, r);
          });
      ST_CHECK_CUDNN(cudnnGetConvolutionForwardWorkspaceSize(handle, plan->x.get(), plan->w.get(), plan->conv.get(),
                                                             plan->y.get(), chosen.algo, &plan->workspace_bytes));
      break;
    }
    case Direction::backward_data: {
      ST_CHECK_CUDNN(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle, &max_count));
      std::vector<cudnnConvolutionBwdDataAlgoPerf_t> results(max_count);
      const auto& chosen = choose_algorithm(
          *plan, dir, d, results, search, deterministic_backward, any_math,
          [&](cudnnConvolutionBwdDataAlgoPerf_t* r, int* count) {
            return cudnnFindConvolutionBackwardDataAlgorithm(handle, plan->w.get(), plan->y.get(), plan->conv.get(),
                                                             plan->x.get(), max_count, count, r);
          },
          [&](cudnnConvolutionBwdDataAlgoPerf_t* r, int* count) {
            return cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, plan->w.get(), plan->y.get(), plan->conv.get(),
                                                               plan->x.get(), max_count, count, r);
          });
      ST_CHECK_CUDNN(cudnnGetConvolutionBackwardDataWorkspaceSize(
          handle, plan->w.get(), plan->y.get(), plan->conv.get(), plan->x.get(), chosen.algo, &plan->workspace_bytes));
      break;
    }
    case Direction::backward_filter: {
      ST_CHECK_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle, &max_count));
      std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> results(max_count);
      const auto& chosen = choose_algorithm(
          *plan, dir, d, results, search, deterministic_backward, any_math,
          [&](cudnnConvolutionBwdFilterAlgoPerf_t* r, int* count) {
            return cudnnFindConvolutionBackwardFilterAlgorithm(handle, plan->x.get(), plan->y.get(), plan->conv.get(),
                                                               plan->w.get(), max_count, count, r);
          },
          [&](cudnnConvolutionBwdFilterAlgoPerf_t* r, int* count) {
            return cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, plan->x.get(), plan->y.get(), plan->conv.get(),
                                                                 plan->w.get(), max_count, count, r);
          });
      ST_CHECK_CUDNN(cudnnGetConvolutionBackwardFilterWorkspaceSize(
          handle, plan->x.get(), plan->y.get(), plan->conv.get(), plan->w.get(), chosen.algo, &plan->workspace_bytes));
      break;
    }
  }
  return plan;
}

// A 16-bit plan, or where cuDNN offers no usable 16-bit algorithm for the shape, an fp32 one.
std::unique_ptr<ConvPlan> make_plan_or_fp32(cudnnHandle_t handle, Direction dir, const ConvDims& d, bool tf32,
                                            bool search, bool deterministic_backward, const ConvData& data) {
  if (!data.half) return make_plan(handle, dir, d, tf32, search, deterministic_backward, data);
  try {
    return make_plan(handle, dir, d, tf32, search, deterministic_backward, data);
  } catch (const Error&) {  // throw_no_algorithm: no 16-bit algorithm for this shape on this GPU
    return make_plan(handle, dir, d, tf32, search, deterministic_backward, ConvData{});
  }
}

graph::ConvDirection graph_direction(Direction dir) {
  switch (dir) {
    case Direction::backward_data:
      return graph::ConvDirection::backward_data;
    case Direction::backward_filter:
      return graph::ConvDirection::backward_filter;
    case Direction::forward:
      break;
  }
  return graph::ConvDirection::forward;
}

// The graph API's plan for the legacy plan's format, or why there is none. Grouped shapes stay
// legacy: the graph API infers the groups from the filter's channels, which no GPU run here has
// checked yet, and no model we time has them.
std::string attach_graph_plan(Context& ctx, ConvPlan& plan, Direction dir, const ConvDims& d, bool tf32, bool search,
                              bool deterministic_backward) {
  if (d.groups > 1) return "grouped convolutions run the legacy way";
  graph::ConvGeometry g;
  g.n = d.n, g.c = d.c, g.h = d.h, g.w = d.w, g.o = d.o, g.kh = d.kh, g.kw = d.kw, g.oh = d.oh, g.ow = d.ow;
  g.stride_h = d.stride_h, g.stride_w = d.stride_w, g.pad_h = d.pad_h, g.pad_w = d.pad_w;
  graph::GraphPlanRequest request;
  request.direction = graph_direction(dir);
  request.data = plan.data.type();
  request.tf32 = tf32;
  request.prefer_deterministic = dir != Direction::forward && deterministic_backward;  // as the legacy rule
  request.search = search;
  request.max_workspace_bytes = kMaxWorkspaceBytes;
  graph::GraphPlanResult result = graph::make_conv_graph_plan(ctx, g, request);
  plan.graph = std::move(result.plan);
  return result.why_not;
}

// "heuristic (graph API: why)", or "heuristic (the search failed: X; graph API: why)".
std::string with_graph_reason(const std::string& chosen_by, const std::string& why) {
  const std::string reason = "graph API: " + why;
  if (!chosen_by.empty() && chosen_by.back() == ')')
    return chosen_by.substr(0, chosen_by.size() - 1) + "; " + reason + ")";
  return chosen_by + " (" + reason + ")";
}

// A shape's plan: the legacy one, and with --conv-algo graph* the graph API's beside it. In graph
// mode the legacy plan is the fallback (and the fused epilogue's), chosen by its heuristics; only
// where the graph API has no plan and a search was asked does the legacy search run, as
// --conv-algo search would.
std::unique_ptr<ConvPlan> make_conv_plan(Context& ctx, Direction dir, const ConvDims& d, bool tf32, bool search,
                                         bool use_graph, bool deterministic_backward, const ConvData& data) {
  const cudnnHandle_t handle = scaletrain::cuda::cudnn_handle(ctx);
  std::unique_ptr<ConvPlan> plan =
      make_plan_or_fp32(handle, dir, d, tf32, search && !use_graph, deterministic_backward, data);
  if (use_graph) {
    const std::string why = attach_graph_plan(ctx, *plan, dir, d, tf32, search, deterministic_backward);
    if (!plan->graph) {
      if (search) plan = make_plan_or_fp32(handle, dir, d, tf32, true, deterministic_backward, data);
      plan->chosen_by = with_graph_reason(plan->chosen_by, why);
    }
  }
  record_plan(*plan, dir, d, tf32, plan->data);
  return plan;
}

// The process's plans. Built under the lock (once per shape, from heuristics: cheap); a plan is
// never changed or freed after, so the reference stays valid without the lock. The map is never
// destroyed: destroying its descriptors at exit would call into cuDNN during static destruction,
// whose order against the library's own teardown is not ours to rely on.
const ConvPlan& conv_plan(Context& ctx, Direction dir, const ConvDims& d) {
  static std::mutex mutex;
  static auto* plans = new std::map<PlanKey, std::unique_ptr<ConvPlan>>;
  int gpu = 0;
  ST_CHECK_CUDA(cudaGetDevice(&gpu));  // algorithms are chosen for a GPU model; the key names the GPU
  const bool tf32 = ctx.allow_tf32();
  const ConvData data = conv_data(ctx);
  const bool search = ctx.conv_search();
  const bool use_graph = ctx.conv_graph();
  const bool nondeterministic = ctx.conv_nondeterministic();
  const PlanKey key{gpu, dir, tf32, search, use_graph, nondeterministic, static_cast<int>(data.type()), d};
  std::lock_guard<std::mutex> lock(mutex);
  auto it = plans->find(key);
  if (it == plans->end())
    it = plans->emplace(key, make_conv_plan(ctx, dir, d, tf32, search, use_graph, !nondeterministic, data)).first;
  return *it->second;
}

// dst[b][j][i] = src[b][i][j] for `batches` row-major (rows x cols) matrices: OIHW -> OHWI is
// (C/G, KH*KW) -> (KH*KW, C/G) per output channel, OHWI -> OIHW the reverse. Each element is
// converted as it moves (ElemKind: f32 to f32, f32 to a 16-bit format with one rounding to
// nearest even, a 16-bit format to f32 exactly: the cast kernels' conversions), so that a filter
// is transposed and cast in one pass rather than two.
__global__ void batched_transpose(const void* src, ElemKind sk, void* dst, ElemKind dk, int64_t batches, int64_t rows,
                                  int64_t cols) {
  const int64_t per = rows * cols, total = batches * per;
  for (int64_t i = grid_first(); i < total; i += grid_stride()) {
    const int64_t b = i / per, r = i - b * per;
    const int64_t j = r / rows, k = r - j * rows;  // dst (b, j, k) = src (b, k, j)
    store_float(dst, dk, i, load_float(src, sk, b * per + k * cols + j));
  }
}

ElemKind kind_of(const std::optional<HalfFormat>& half) {
  if (!half) return ElemKind::f32;
  return *half == HalfFormat::fp16 ? ElemKind::f16 : ElemKind::bf16;
}

void launch_transpose(Context& ctx, const void* src, ElemKind sk, void* dst, ElemKind dk, int64_t batches, int64_t rows,
                      int64_t cols) {
  const int64_t total = batches * rows * cols;
  batched_transpose<<<scaletrain::cuda::blocks_for(total), scaletrain::cuda::kThreadsPerBlock, 0,
                      scaletrain::cuda::compute_stream(ctx)>>>(src, sk, dst, dk, batches, rows, cols);
  ST_CHECK_LAUNCH();
}

// 16-bit storage (ops/op.hpp, with_half_storage): an activation tensor (x, y, dx, dy) may be f32
// or the precision's 16-bit type. One already in the plan's format goes to cuDNN as it is; another
// is copied into the plan's format in the scratch (exactly: fp32 holding 16-bit values cast to 16
// bits, or 16 bits widened for an fp32 plan) and a result written there is converted into it
// after (a 16-bit result widened exactly, an fp32 plan's result rounded once). The filter and its
// gradient are fp32 tensors (the weight copies and the flat gradients).
bool in_plan_format(const ConvData& data, const Tensor& t) {
  if (!data.half) return t.dtype() == DType::f32;
  return t.dtype() == (*data.half == HalfFormat::fp16 ? DType::f16 : DType::bf16);
}

// Bytes of a scratch copy of t in the plan's format: none where t is in it.
std::size_t copy_bytes_for(const ConvData& data, const Tensor& t) {
  if (in_plan_format(data, t)) return 0;
  return align_scratch(std::size_t(t.numel()) * (data.half ? 2 : sizeof(float)));
}

// Bytes of the fp32 OHWI filter (or filter gradient) where a transpose is needed in an fp32 plan;
// a 16-bit plan's transpose goes straight into (or comes straight from) the 16-bit copy.
std::size_t fp32_transpose_bytes(const ConvDims& d, const ConvData& data, int64_t w_count) {
  return needs_transpose(d) && !data.half ? align_scratch(sizeof(float) * std::size_t(w_count)) : 0;
}

// One scratch block: the fp32 OHWI weights (fp32_transpose_bytes), then the copies in the plan's
// format of the convolution's three tensors (x or dx, the filter, y or dy) where they are not in
// it, then cuDNN's workspace.
struct Scratch {
  float* weights = nullptr;  // fp32 plans: the OHWI filter, or dw (backward filter), where transposed
  void* x = nullptr;         // x (forward, backward filter) or dx (backward data)
  void* w = nullptr;         // 16-bit: the OHWI filter, or dw (backward filter)
  void* y = nullptr;         // y (forward) or dy (backward)
  void* workspace = nullptr;
};

Scratch scratch_for(Context& ctx, const ConvDims& d, const ConvPlan& plan, const ConvData& data, const Tensor& x_like,
                    const Tensor& y_like) {
  const int64_t w_count = int64_t{d.o} * d.group_channels() * d.kh * d.kw;
  const std::size_t weight_bytes = fp32_transpose_bytes(d, data, w_count);
  const std::size_t x_bytes = copy_bytes_for(data, x_like);
  const std::size_t w_bytes = data.copy_bytes(w_count);
  const std::size_t y_bytes = copy_bytes_for(data, y_like);
  const std::size_t work_bytes = plan.scratch_workspace_bytes();
  char* block =
      static_cast<char*>(scaletrain::cuda::workspace(ctx, weight_bytes + x_bytes + w_bytes + y_bytes + work_bytes));
  Scratch s;
  std::size_t offset = 0;
  if (weight_bytes > 0) s.weights = reinterpret_cast<float*>(block);
  offset += weight_bytes;
  if (x_bytes > 0) s.x = block + offset;
  if (w_bytes > 0) s.w = block + offset + x_bytes;
  if (y_bytes > 0) s.y = block + offset + x_bytes + w_bytes;
  offset += x_bytes + w_bytes + y_bytes;
  if (work_bytes > 0) s.workspace = block + offset;
  return s;
}

// The fp32 filter operand cuDNN reads: `src` itself in fp32, else its 16-bit copy in `copy`.
const void* filter_operand(Context& ctx, const ConvData& data, const float* src, int64_t count, void* copy) {
  if (!data.half) return src;
  launch_cast_to_half(scaletrain::cuda::compute_stream(ctx), src, copy, count, *data.half);
  return copy;
}

// The OHWI filter cuDNN reads, from the fp32 OIHW weight w: w itself where the two layouts agree
// (fp32 plan) or its 16-bit copy in `copy`; else w transposed into `weights` (fp32 plan) or
// transposed and cast into `copy` in one pass (16-bit plan).
const void* filter_for_plan(Context& ctx, const ConvDims& d, const ConvData& data, const Tensor& w, float* weights,
                            void* copy) {
  const float* src = static_cast<const float*>(w.raw());
  if (!needs_transpose(d)) return filter_operand(ctx, data, src, w.numel(), copy);
  void* dst = data.half ? copy : weights;
  launch_transpose(ctx, src, ElemKind::f32, dst, kind_of(data.half), d.o, d.group_channels(), int64_t{d.kh} * d.kw);
  return dst;
}

// An activation operand: t itself in the plan's format, else its copy in `copy`.
const void* operand(Context& ctx, const ConvData& data, const Tensor& t, void* copy) {
  if (in_plan_format(data, t)) return t.raw();
  // The plan's format and the activation dtype both follow the precision: a 16-bit tensor of the
  // other 16-bit type cannot reach here, and would be misread.
  ST_CHECK(t.dtype() == DType::f32 || !data.half,
           "internal: a " << dtype_name(t.dtype()) << " tensor for a " << data.name() << " convolution plan");
  const cudaStream_t stream = scaletrain::cuda::compute_stream(ctx);
  if (data.half)
    launch_cast_to_half(stream, static_cast<const float*>(t.raw()), copy, t.numel(), *data.half);
  else
    launch_cast_from_half(stream, t.raw(), static_cast<float*>(copy), t.numel(), half_format_of(t));
  return copy;
}

// Where cuDNN writes an activation result: t itself in the plan's format, else `copy`, converted
// into t afterwards by finish_result.
void* result(const ConvData& data, Tensor& t, void* copy) { return in_plan_format(data, t) ? t.raw() : copy; }
void finish_result(Context& ctx, const ConvData& data, const void* copy, Tensor& t) {
  if (in_plan_format(data, t)) return;
  const cudaStream_t stream = scaletrain::cuda::compute_stream(ctx);
  if (data.half)
    launch_cast_from_half(stream, copy, static_cast<float*>(t.raw()), t.numel(), *data.half);
  else
    launch_cast_to_half(stream, static_cast<const float*>(copy), t.raw(), t.numel(), half_format_of(t));
}

// Where cuDNN writes the OHWI filter gradient: the 16-bit `copy` (16-bit plan); else dw itself
// where the layouts agree, or `weights` to be transposed into it.
void* filter_result(const ConvDims& d, const ConvData& data, Tensor& dw, float* weights, void* copy) {
  if (data.half) return copy;
  return needs_transpose(d) ? weights : dw.raw();
}

// dw (fp32 OIHW) from what cuDNN wrote: the 16-bit copy widened, transposed where the layouts
// differ (one pass), or the fp32 OHWI scratch transposed.
void finish_filter_gradient(Context& ctx, const ConvDims& d, const ConvData& data, const void* written, Tensor& dw) {
  if (!needs_transpose(d)) {
    if (data.half)
      launch_cast_from_half(scaletrain::cuda::compute_stream(ctx), written, static_cast<float*>(dw.raw()), dw.numel(),
                            *data.half);
    return;
  }
  // OHWI (O, KH*KW, C) back to our OIHW (O, C, KH*KW).
  launch_transpose(ctx, written, kind_of(data.half), dw.raw(), ElemKind::f32, d.o, int64_t{d.kh} * d.kw,
                   d.group_channels());
}

// The bias's descriptors, (1, O, 1, 1) against y or dy (N, O, OH, OW) in NHWC. Made per call: two
// host-side descriptors cost microseconds next to the convolution, and keep the empty-input paths
// (no plan) simple.
struct BiasDescs {
  TensorDesc bias, y;
  BiasDescs(const Tensor& y_nhwc, const char* op) {
    const Shape& s = y_nhwc.shape();
    bias.set(CUDNN_TENSOR_NHWC, 1, to_int(s[3], op, "output channels"), 1, 1);
    y.set(CUDNN_TENSOR_NHWC, to_int(s[0], op, "batch"), to_int(s[3], op, "output channels"),
          to_int(s[1], op, "output height"), to_int(s[2], op, "output width"));
  }
};

// y (NHWC, 16-bit) += b (O, fp32), each sum in float and stored once in y's format.
__global__ void add_channel_bias_kernel(void* y, ElemKind yk, const float* b, int64_t channels, int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride())
    store_float(y, yk, i, load_float(y, yk, i) + b[i % channels]);
}

// y (NHWC, 16-bit) = result (fp32) + b (O, fp32), stored once in y's format.
__global__ void add_bias_store_kernel(const float* result, const float* b, void* y, ElemKind yk, int64_t channels,
                                      int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) store_float(y, yk, i, result[i] + b[i % channels]);
}

void add_bias_and_store(Context& ctx, const float* result, const Tensor& b, Tensor& y, const char* op) {
  const int64_t n = y.numel();
  add_bias_store_kernel<<<scaletrain::cuda::blocks_for(n), scaletrain::cuda::kThreadsPerBlock, 0,
                          scaletrain::cuda::compute_stream(ctx)>>>(result, static_cast<const float*>(b.raw()), y.raw(),
                                                                   elem_kind(y, op), y.dim(3), n);
  ST_CHECK_LAUNCH();
}

// y += b broadcast over N, OH and OW.
void add_bias(Context& ctx, const Tensor& b, Tensor& y, const char* op) {
  if (y.numel() == 0) return;
  if (y.dtype() != DType::f32) {
    const int64_t n = y.numel();
    add_channel_bias_kernel<<<scaletrain::cuda::blocks_for(n), scaletrain::cuda::kThreadsPerBlock, 0,
                              scaletrain::cuda::compute_stream(ctx)>>>(y.raw(), elem_kind(y, op),
                                                                       static_cast<const float*>(b.raw()), y.dim(3), n);
    ST_CHECK_LAUNCH();
    return;
  }
  const BiasDescs descs(y, op);
  const float one = 1.0f;
  ST_CHECK_CUDNN(cudnnAddTensor(scaletrain::cuda::cudnn_handle(ctx), &one, descs.bias.get(), b.raw(), &one,
                                descs.y.get(), y.raw()));
}

// db = the sum of dy over N, OH and OW, overwritten.
void bias_gradient(Context& ctx, const Tensor& dy, Tensor& db, const char* op) {
  if (db.numel() == 0) return;
  if (dy.numel() == 0) {  // a sum over nothing
    db.zero();
    return;
  }
  // cuDNN sums an fp32 dy into the fp32 db; a 16-bit dy is widened for it first (only layers with
  // a bias pay this pass: ResNet's convolutions have none).
  const Tensor dy32 = fp32_of(ctx, dy);
  const BiasDescs descs(dy32, op);
  const float one = 1.0f, zero = 0.0f;
  ST_CHECK_CUDNN(cudnnConvolutionBackwardBias(scaletrain::cuda::cudnn_handle(ctx), &one, descs.y.get(), dy32.raw(),
                                              &zero, descs.bias.get(), db.raw()));
}

std::string shape_text(const ConvDims& d) {
  std::ostringstream os;
  os << "input (" << d.n << ", " << d.h << ", " << d.w << ", " << d.c << "), weight (" << d.o << ", "
     << d.group_channels() << ", " << d.kh << ", " << d.kw << "), stride " << d.stride_h << "x" << d.stride_w
     << ", padding " << d.pad_h << "x" << d.pad_w;
  return os.str();
}

// Whether the graph plan runs this call: there is one, and the operands are as aligned as it was
// made for (views into a tensor's storage may not be; the legacy call runs those, once warned).
bool graph_runs(const ConvPlan& plan, Direction dir, const ConvDims& d, const void* x, const void* w, const void* y) {
  if (!plan.graph) return false;
  if (graph::graph_aligned(x) && graph::graph_aligned(w) && graph::graph_aligned(y)) return true;
  if (!plan.warned_unaligned.exchange(true))
    ST_WARN(direction_name(dir) << ": an operand is not " << graph::kOperandAlignment
                                << "-byte aligned for cuDNN's graph plan (engine " << plan.graph->engine.global_index
                                << ") for " << shape_text(d) << "; such calls run the legacy algorithm " << plan.algo);
  return false;
}

// The graph plan, once finalized (and, after a search, run), must execute: a failure here is a
// bug to see, not a case to hide behind the legacy call. The statuses cuDNN could return here
// (a bad pointer, an engine refusing at run time, a launch failure) may also follow a kernel that
// already ran and left the stream or the output in an unknown state, so the call throws, naming
// the op, the shape and the engine, rather than running the legacy algorithm after it.
void run_graph_plan(Context& ctx, Direction dir, const ConvDims& d, const ConvPlan& plan, const void* x, const void* w,
                    const void* y, void* workspace) {
  const cudnnStatus_t status =
      graph::execute_graph_plan(scaletrain::cuda::cudnn_handle(ctx), *plan.graph, x, w, y, workspace);
  ST_CHECK(status == CUDNN_STATUS_SUCCESS,
           direction_name(dir) << ": cuDNN's graph API could not execute its finalized plan (engine "
                               << plan.graph->engine.global_index << ", knobs " << plan.graph->knobs << ", "
                               << plan.data.name() << ") for " << shape_text(d) << ": " << cudnnGetErrorString(status)
                               << " (--conv-algo heuristic or search avoids the graph API)");
}

// The filter is the fp32 weight copy; the ops cast it for a 16-bit plan.
void check_float_filter(const Tensor& w, const char* op) {
  ST_CHECK(w.dtype() == DType::f32,
           op << ": the filter must be float32 (the fp32 weight copy), got " << dtype_name(w.dtype()));
}

}  // namespace

void conv2d_forward(Context& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) {
  const char* op = "conv2d_forward";
  check_float_filter(w, op);
  require_symmetric_padding(p, op);
  if (x.numel() == 0) {  // no batch, or an empty image or channel count: a sum over nothing
    y.zero();
    if (b.defined()) add_bias(ctx, b, y, op);
    return;
  }
  const ConvDims d = conv_dims(p, x.shape(), w.shape(), op);
  const ConvPlan& plan = conv_plan(ctx, Direction::forward, d);
  const ConvData& data = plan.data;
  const Scratch s = scratch_for(ctx, d, plan, data, x, y);
  const void* x_in = operand(ctx, data, x, s.x);
  const void* w_in = filter_for_plan(ctx, d, data, w, s.weights, s.w);
  void* y_out = result(data, y, s.y);
  if (graph_runs(plan, Direction::forward, d, x_in, w_in, y_out)) {
    run_graph_plan(ctx, Direction::forward, d, plan, x_in, w_in, y_out, s.workspace);
  } else {
    const float one = 1.0f, zero = 0.0f;
    ST_CHECK_CUDNN(cudnnConvolutionForward(scaletrain::cuda::cudnn_handle(ctx), &one, plan.x.get(), x_in, plan.w.get(),
                                           w_in, plan.conv.get(), static_cast<cudnnConvolutionFwdAlgo_t>(plan.algo),
                                           s.workspace, plan.workspace_bytes, &zero, plan.y.get(), y_out));
  }
  if (b.defined() && !data.half && y.dtype() != DType::f32) {
    // An fp32 plan's result for a 16-bit y: the bias added in float and y rounded once, as the
    // fp32 path and the dispatch's rounding do.
    add_bias_and_store(ctx, static_cast<const float*>(s.y), b, y, op);
    return;
  }
  finish_result(ctx, data, s.y, y);
  if (b.defined()) add_bias(ctx, b, y, op);
}

namespace {

// Plans for which cuDNN refused a call beyond the plain convolution (a fused epilogue, a blend
// into the output), which then run the plain call and a kernel after it.
class RefusedPlans {
 public:
  bool contains(const ConvPlan& plan) {
    std::lock_guard<std::mutex> lock(mutex_);
    return plans_.count(&plan) > 0;
  }
  // True the first time, for the one warning.
  bool add(const ConvPlan& plan) {
    std::lock_guard<std::mutex> lock(mutex_);
    return plans_.insert(&plan).second;
  }

 private:
  std::mutex mutex_;
  std::set<const ConvPlan*> plans_;
};

// The plans whose fused bias and ReLU cuDNN refused, and those whose blend into dx it refused
// (conv2d_backward_data_add). Never destroyed, as the plans.
RefusedPlans& fusion_refusals() {
  static auto* refused = new RefusedPlans;
  return *refused;
}
RefusedPlans& blend_refusals() {
  static auto* refused = new RefusedPlans;
  return *refused;
}

bool fusion_refused(const ConvPlan& plan) { return fusion_refusals().contains(plan); }

// cudnnConvolutionBiasActivationForward: y = relu(1 * conv(x, w) + 0 * z + b) with z = y (unread
// when its factor is 0), x and y in the plan's format, the filter and the bias copied into it (the
// bias in y's type, as cuDNN's fused configurations take it; under a mixed precision the bias is a
// 16-bit value already, so the copy is exact). False where cuDNN does not support the fusion for
// this plan (NOT_SUPPORTED or BAD_PARAM), which is then remembered; any other error throws.
bool run_fused_bias_relu(Context& ctx, const ConvDims& d, const ConvPlan& plan, const Tensor& x, const Tensor& w,
                         const Tensor& b, Tensor& y) {
  const ConvData& data = plan.data;
  const int64_t w_count = w.numel();
  const std::size_t weight_bytes = fp32_transpose_bytes(d, data, w_count);
  const std::size_t w_bytes = data.copy_bytes(w_count), b_bytes = data.copy_bytes(d.o);
  char* block =
      static_cast<char*>(scaletrain::cuda::workspace(ctx, weight_bytes + w_bytes + b_bytes + plan.workspace_bytes));
  float* weights = weight_bytes > 0 ? reinterpret_cast<float*>(block) : nullptr;
  const void* w_in = filter_for_plan(ctx, d, data, w, weights, block + weight_bytes);
  const void* b_in = filter_operand(ctx, data, static_cast<const float*>(b.raw()), d.o, block + weight_bytes + w_bytes);
  void* work = plan.workspace_bytes > 0 ? block + weight_bytes + w_bytes + b_bytes : nullptr;
  TensorDesc bias;
  bias.set(CUDNN_TENSOR_NHWC, 1, d.o, 1, 1, data.type());
  static const ReluDesc relu;  // a host-side descriptor, only read once made
  const float one = 1.0f, zero = 0.0f;
  const cudnnStatus_t status = cudnnConvolutionBiasActivationForward(
      scaletrain::cuda::cudnn_handle(ctx), &one, plan.x.get(), x.raw(), plan.w.get(), w_in, plan.conv.get(),
      static_cast<cudnnConvolutionFwdAlgo_t>(plan.algo), work, plan.workspace_bytes, &zero, plan.y.get(), y.raw(),
      bias.get(), b_in, relu.get(), plan.y.get(), y.raw());
  // NOT_SUPPORTED, or BAD_PARAM for a descriptor combination its fused configurations lack (the
  // bias's type, say): the two ops give the same values, so the run goes on with them, and says so.
  if (status == CUDNN_STATUS_NOT_SUPPORTED || status == CUDNN_STATUS_BAD_PARAM) {
    if (fusion_refusals().add(plan))
      ST_WARN("conv2d_bias_relu_forward: cuDNN refuses the fused bias and ReLU ("
              << cudnnGetErrorString(status) << ") with algorithm " << plan.algo << " in " << data.name()
              << " for input (" << d.n << ", " << d.h << ", " << d.w << ", " << d.c << "), weight (" << d.o << ", "
              << d.group_channels() << ", " << d.kh << ", " << d.kw
              << "); that shape runs the convolution and the ReLU apart");
    return false;
  }
  ST_CHECK_CUDNN(status);
  return true;
}

}  // namespace

// The fused op where the plan's format holds x and y (16-bit storage under a mixed precision, or
// fp32) and cuDNN takes the fusion; the convolution (with its bias) and the ReLU kernel otherwise,
// whose values are the same but for the rounding: fused, conv + bias is rounded once, as on the
// CPU; apart, a 16-bit conv result is rounded before the bias is added.
void conv2d_bias_relu_forward(Context& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& w, const Tensor& b,
                              Tensor& y) {
  const char* op = "conv2d_bias_relu_forward";
  ST_CHECK(w.dtype() == DType::f32 && b.dtype() == DType::f32,
           op << ": the filter and bias must be float32 (the fp32 weight copies), got " << dtype_name(w.dtype())
              << " and " << dtype_name(b.dtype()));
  require_symmetric_padding(p, op);
  if (x.numel() > 0) {
    const ConvDims d = conv_dims(p, x.shape(), w.shape(), op);
    const ConvPlan& plan = conv_plan(ctx, Direction::forward, d);
    if (in_plan_format(plan.data, x) && in_plan_format(plan.data, y) && !fusion_refused(plan) &&
        run_fused_bias_relu(ctx, d, plan, x, w, b, y))
      return;
  }
  ops::cuda::conv2d_forward(ctx, p, x, w, b, y);  // this file's kernel, not the dispatching op
  ops::cuda::relu_forward(ctx, y, y);
}

namespace {

// dx = the input gradient + beta * dx, beta 0 or 1. beta 1 only where dx is in the plan's format
// and the legacy API runs (cuDNN then blends into dx itself, in float, and rounds once). Returns
// the legacy call's status, unchecked, for the caller to act on a refused blend; any other
// failure throws.
cudnnStatus_t run_backward_data(Context& ctx, const ConvDims& d, const ConvPlan& plan, const Tensor& dy,
                                const Tensor& w, Tensor& dx, float beta) {
  const ConvData& data = plan.data;
  ST_CHECK(beta == 0.0f || (!plan.graph && in_plan_format(data, dx)),
           "internal: conv2d_backward_data blends only into dx in its plan's format, through the legacy API");
  const Scratch s = scratch_for(ctx, d, plan, data, dx, dy);
  const void* w_in = filter_for_plan(ctx, d, data, w, s.weights, s.w);
  const void* dy_in = operand(ctx, data, dy, s.y);
  void* dx_out = result(data, dx, s.x);
  if (beta == 0.0f && graph_runs(plan, Direction::backward_data, d, dx_out, w_in, dy_in)) {
    run_graph_plan(ctx, Direction::backward_data, d, plan, dx_out, w_in, dy_in, s.workspace);
  } else {
    const float one = 1.0f;
    const cudnnStatus_t status =
        cudnnConvolutionBackwardData(scaletrain::cuda::cudnn_handle(ctx), &one, plan.w.get(), w_in, plan.y.get(), dy_in,
                                     plan.conv.get(), static_cast<cudnnConvolutionBwdDataAlgo_t>(plan.algo),
                                     s.workspace, plan.workspace_bytes, &beta, plan.x.get(), dx_out);
    if (status != CUDNN_STATUS_SUCCESS) return status;
  }
  finish_result(ctx, data, s.x, dx);
  return CUDNN_STATUS_SUCCESS;
}

// Whether cuDNN may blend the gradient into dx for this plan: dx in the plan's format, the legacy
// API (a graph plan is built to overwrite), and no refusal before.
bool blends(const ConvPlan& plan, const Tensor& dx) {
  return !plan.graph && in_plan_format(plan.data, dx) && !blend_refusals().contains(plan);
}

// cuDNN refused the blend (NOT_SUPPORTED, or BAD_PARAM for a combination its kernels lack): the
// plan adds apart from then on, and the run says so once.
void remember_refused_blend(const ConvPlan& plan, const ConvDims& d, cudnnStatus_t status) {
  if (blend_refusals().add(plan))
    ST_WARN("conv2d_backward_data_add: cuDNN refuses to blend the input gradient into dx ("
            << cudnnGetErrorString(status) << ") with algorithm " << plan.algo << " in " << plan.data.name() << " for "
            << shape_text(d) << "; that shape computes the gradient apart and adds it");
}

}  // namespace

void conv2d_backward_data(Context& ctx, const Conv2dParams& p, const Tensor& dy, const Tensor& w, Tensor& dx) {
  const char* op = "conv2d_backward_data";
  check_float_filter(w, op);
  require_symmetric_padding(p, op);
  if (dx.numel() == 0) return;
  const ConvDims d = conv_dims(p, dx.shape(), w.shape(), op);
  ST_CHECK_CUDNN(run_backward_data(ctx, d, conv_plan(ctx, Direction::backward_data, d), dy, w, dx, 0.0f));
}

// cuDNN blends the gradient into dx where it can (beta 1). Elsewhere the gradient is computed
// apart, in the plan's format, and added: a 16-bit plan's gradient is rounded before the add, as
// the two ops were; an fp32 plan's (a shape with no 16-bit algorithm) stays fp32 until the one
// rounding of the sum.
void conv2d_backward_data_add(Context& ctx, const Conv2dParams& p, const Tensor& dy, const Tensor& w, Tensor& dx) {
  const char* op = "conv2d_backward_data_add";
  check_float_filter(w, op);
  require_symmetric_padding(p, op);
  if (dx.numel() == 0) return;
  const ConvDims d = conv_dims(p, dx.shape(), w.shape(), op);
  const ConvPlan& plan = conv_plan(ctx, Direction::backward_data, d);
  if (blends(plan, dx)) {
    const cudnnStatus_t status = run_backward_data(ctx, d, plan, dy, w, dx, 1.0f);
    if (status == CUDNN_STATUS_SUCCESS) return;
    // cuDNN checks its arguments before it launches anything, so dx is untouched here.
    if (status != CUDNN_STATUS_NOT_SUPPORTED && status != CUDNN_STATUS_BAD_PARAM) ST_CHECK_CUDNN(status);
    remember_refused_blend(plan, d, status);
  }
  const DType plan_dtype = plan.data.half ? dx.dtype() : DType::f32;
  Tensor gradient = Tensor::empty(dx.shape(), plan_dtype, dx.device());
  ST_CHECK_CUDNN(run_backward_data(ctx, d, plan, dy, w, gradient, 0.0f));
  ops::cuda::add_inplace(ctx, dx, gradient);
}

void conv2d_backward_filter(Context& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& dy, Tensor& dw,
                            Tensor& db) {
  const char* op = "conv2d_backward_filter";
  ST_CHECK(dw.dtype() == DType::f32,
           op << ": the filter's gradient must be float32 (the fp32 weight copy), got " << dtype_name(dw.dtype()));
  require_symmetric_padding(p, op);
  if (db.defined()) bias_gradient(ctx, dy, db, op);
  if (dw.numel() == 0) return;
  if (x.numel() == 0) {  // no batch or an empty image: the gradient is a sum over nothing
    dw.zero();
    return;
  }
  const ConvDims d = conv_dims(p, x.shape(), dw.shape(), op);
  const ConvPlan& plan = conv_plan(ctx, Direction::backward_filter, d);
  const ConvData& data = plan.data;
  const Scratch s = scratch_for(ctx, d, plan, data, x, dy);
  const void* x_in = operand(ctx, data, x, s.x);
  const void* dy_in = operand(ctx, data, dy, s.y);
  void* dw_out = filter_result(d, data, dw, s.weights, s.w);
  if (graph_runs(plan, Direction::backward_filter, d, x_in, dw_out, dy_in)) {
    run_graph_plan(ctx, Direction::backward_filter, d, plan, x_in, dw_out, dy_in, s.workspace);
  } else {
    const float one = 1.0f, zero = 0.0f;
    ST_CHECK_CUDNN(cudnnConvolutionBackwardFilter(scaletrain::cuda::cudnn_handle(ctx), &one, plan.x.get(), x_in,
                                                  plan.y.get(), dy_in, plan.conv.get(),
                                                  static_cast<cudnnConvolutionBwdFilterAlgo_t>(plan.algo), s.workspace,
                                                  plan.workspace_bytes, &zero, plan.w.get(), dw_out));
  }
  finish_filter_gradient(ctx, d, data, dw_out, dw);
}

}  // namespace scaletrain::ops::cuda
