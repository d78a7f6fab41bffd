// One convolution through cuDNN's graph (backend) API (cudnn_graph.hpp says what and why).
//
// The attribute sequences follow the cuDNN backend documentation and cudnn-frontend's builders
// (include/cudnn_frontend_{Tensor,ConvDesc,Operation,OperationGraph,Heuristics,ExecutionPlan,
// VariantPack,Filters}.h), which support cuDNN 8.x and 9.x with the same calls:
//   tensor: DATA_TYPE (DATA_TYPE), DIMENSIONS and STRIDES (INT64 x 4), UNIQUE_ID and
//     BYTE_ALIGNMENT (INT64);
//   convolution: COMP_TYPE (DATA_TYPE), CONV_MODE (CONVOLUTION_MODE), SPATIAL_DIMS (INT64), then
//     DILATIONS, FILTER_STRIDES, PRE_PADDINGS, POST_PADDINGS (INT64 x 2);
//   operation: its three tensors and the convolution (BACKEND_DESCRIPTOR), ALPHA and BETA (FLOAT:
//     the compute type is FLOAT);
//   operation graph: OPS (BACKEND_DESCRIPTOR), HANDLE;
//   heuristics: OPERATION_GRAPH, MODE (HEUR_MODE); RESULTS read as engine configurations;
//   engine configuration: ENGINE (its GLOBAL_INDEX, INT64; its NUMERICAL_NOTE list), KNOB_CHOICES
//     (KNOB_TYPE, KNOB_VALUE INT64);
//   execution plan: ENGINE_CONFIG, HANDLE; WORKSPACE_SIZE (INT64) once finalized;
//   variant pack: DATA_POINTERS (VOID_PTR x 3), UNIQUE_IDS (INT64 x 3), WORKSPACE (VOID_PTR).
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <exception>
#include <numeric>
#include <sstream>
#include <utility>

#include "backend/cuda/cuda_context.hpp"
#include "ops/cuda/cudnn_graph.hpp"
#include "scaletrain/tensor/tensor.hpp"

namespace scaletrain::ops::cuda::graph {

namespace {

// The variant pack's names for the three operands.
constexpr int64_t kXUid = 1, kWUid = 2, kYUid = 3;
// A search times at most this many usable plans (heuristic order), each over kTimedRuns runs.
constexpr std::size_t kMaxTimedPlans = 8;
constexpr int kTimedRuns = 3;

std::string step_failed(const char* call, const char* what, const char* attribute, cudnnStatus_t status) {
  std::ostringstream os;
  os << call << "(" << what;
  if (attribute != nullptr) os << ", " << attribute;
  os << "): " << cudnnGetErrorString(status);
  return os.str();
}

}  // namespace

void check(cudnnStatus_t status, const char* call, const char* what, const char* attribute) {
  if (status != CUDNN_STATUS_SUCCESS) throw GraphApiError(step_failed(call, what, attribute, status), status);
}

void get(const BackendDescriptor& d, cudnnBackendAttributeName_t attribute, const char* name,
         cudnnBackendAttributeType_t type, int64_t requested, int64_t* count, void* values) {
  check(cudnnBackendGetAttribute(d.get(), attribute, type, requested, count, values), "cudnnBackendGetAttribute",
        d.what(), name);
}

// cuDNN 8 requires the handle on the operation graph and the execution plan; cuDNN 9 deprecates
// both attributes (9.8 no longer needs the graph's). A library that refuses the attribute does not
// need it and one that needs it takes it, so its status is not checked here: a handle that was
// needed and not taken shows as the finalize's failure, which names the descriptor.
void offer_handle(const BackendDescriptor& d, cudnnBackendAttributeName_t attribute, cudnnHandle_t handle) {
  (void)cudnnBackendSetAttribute(d.get(), attribute, CUDNN_TYPE_HANDLE, 1, &handle);
}

// ---- BackendDescriptor ---------------------------------------------------------------------------

BackendDescriptor::BackendDescriptor(cudnnBackendDescriptorType_t type, const char* what) : what_(what) {
  const cudnnStatus_t status = cudnnBackendCreateDescriptor(type, &desc_);
  if (status != CUDNN_STATUS_SUCCESS) desc_ = nullptr;
  check(status, "cudnnBackendCreateDescriptor", what);
}

BackendDescriptor::~BackendDescriptor() {
  if (desc_ != nullptr) cudnnBackendDestroyDescriptor(desc_);
}

BackendDescriptor::BackendDescriptor(BackendDescriptor&& other) noexcept
    : desc_(std::exchange(other.desc_, nullptr)), what_(other.what_) {}

BackendDescriptor& BackendDescriptor::operator=(BackendDescriptor&& other) noexcept {
  std::swap(desc_, other.desc_);
  std::swap(what_, other.what_);
  return *this;
}

void BackendDescriptor::set(cudnnBackendAttributeName_t attribute, const char* name, cudnnBackendAttributeType_t type,
                            int64_t count, const void* values) {
  check(cudnnBackendSetAttribute(desc_, attribute, type, count, values), "cudnnBackendSetAttribute", what_, name);
}

void BackendDescriptor::set_descriptor(cudnnBackendAttributeName_t attribute, const char* name,
                                       const BackendDescriptor& value) {
  cudnnBackendDescriptor_t d = value.get();
  set(attribute, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &d);
}

void BackendDescriptor::finalize() { check(try_finalize(), "cudnnBackendFinalize", what_); }

cudnnStatus_t BackendDescriptor::try_finalize() { return cudnnBackendFinalize(desc_); }

// ---- the operation graph -----------------------------------------------------------------------

BackendDescriptor channels_last_tensor(const char* what, int64_t uid, cudnnDataType_t type, int64_t a, int64_t b,
                                       int64_t c, int64_t d, bool is_virtual) {
  BackendDescriptor t(CUDNN_BACKEND_TENSOR_DESCRIPTOR, what);
  const int64_t dims[4] = {a, b, c, d};
  const int64_t strides[4] = {c * d * b, 1, d * b, b};
  const int64_t alignment = static_cast<int64_t>(kOperandAlignment);
  t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, "DATA_TYPE", CUDNN_TYPE_DATA_TYPE, 1, &type);
  t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, "DIMENSIONS", CUDNN_TYPE_INT64, 4, dims);
  t.set(CUDNN_ATTR_TENSOR_STRIDES, "STRIDES", CUDNN_TYPE_INT64, 4, strides);
  t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, "UNIQUE_ID", CUDNN_TYPE_INT64, 1, &uid);
  t.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, "BYTE_ALIGNMENT", CUDNN_TYPE_INT64, 1, &alignment);
  if (is_virtual) {
    const bool yes = true;
    t.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, "IS_VIRTUAL", CUDNN_TYPE_BOOLEAN, 1, &yes);
  }
  t.finalize();
  return t;
}

// PyTorch's convolution: a cross-correlation (the kernel not flipped), dilation 1, the same
// padding before and after, accumulated in fp32.
BackendDescriptor convolution(const ConvGeometry& g) {
  BackendDescriptor conv(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, "convolution");
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t spatial_dims = 2;
  const int64_t dilation[2] = {1, 1}, stride[2] = {g.stride_h, g.stride_w}, padding[2] = {g.pad_h, g.pad_w};
  conv.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, "COMP_TYPE", CUDNN_TYPE_DATA_TYPE, 1, &compute);
  conv.set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, "CONV_MODE", CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
  conv.set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, "SPATIAL_DIMS", CUDNN_TYPE_INT64, 1, &spatial_dims);
  conv.set(CUDNN_ATTR_CONVOLUTION_DILATIONS, "DILATIONS", CUDNN_TYPE_INT64, 2, dilation);
  conv.set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, "FILTER_STRIDES", CUDNN_TYPE_INT64, 2, stride);
  conv.set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, "PRE_PADDINGS", CUDNN_TYPE_INT64, 2, padding);
  conv.set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, "POST_PADDINGS", CUDNN_TYPE_INT64, 2, padding);
  conv.finalize();
  return conv;
}

namespace {

// Each direction's operation descriptor and the attributes of its x-like, filter-like and y-like
// tensors (forward: x, w, y; backward data: dx, w, dy; backward filter: x, dw, dy).
struct OperationKind {
  cudnnBackendDescriptorType_t type;
  const char* what;
  cudnnBackendAttributeName_t x, w, y, conv, alpha, beta;
};

OperationKind operation_kind(ConvDirection direction) {
  switch (direction) {
    case ConvDirection::backward_data:
      return {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
              "convolution backward data operation",
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA};
    case ConvDirection::backward_filter:
      return {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
              "convolution backward filter operation",
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA};
    case ConvDirection::forward:
      break;
  }
  return {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
          "convolution forward operation",
          CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
          CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
          CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
          CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
          CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
          CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA};
}

}  // namespace

// result = 1 * conv + 0 * result: every result is overwritten, as the ops' contracts say.
BackendDescriptor convolution_operation(ConvDirection direction, const BackendDescriptor& x, const BackendDescriptor& w,
                                        const BackendDescriptor& y, const BackendDescriptor& conv) {
  const OperationKind kind = operation_kind(direction);
  BackendDescriptor op(kind.type, kind.what);
  op.set_descriptor(kind.x, "x (dx)", x);
  op.set_descriptor(kind.w, "w (dw)", w);
  op.set_descriptor(kind.y, "y (dy)", y);
  op.set_descriptor(kind.conv, "CONV_DESC", conv);
  const float alpha = 1.0f, beta = 0.0f;
  op.set(kind.alpha, "ALPHA", CUDNN_TYPE_FLOAT, 1, &alpha);
  op.set(kind.beta, "BETA", CUDNN_TYPE_FLOAT, 1, &beta);
  op.finalize();
  return op;
}

BackendDescriptor operation_graph(cudnnHandle_t handle, const std::vector<const BackendDescriptor*>& ops) {
  BackendDescriptor graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
  std::vector<cudnnBackendDescriptor_t> raw;
  for (const BackendDescriptor* op : ops) raw.push_back(op->get());
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, "OPS", CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(raw.size()),
            raw.data());
  offer_handle(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, handle);
  graph.finalize();
  return graph;
}

namespace {

// ---- engines -----------------------------------------------------------------------------------

const char* note_name(cudnnBackendNumericalNote_t note) {
  switch (note) {
    case CUDNN_NUMERICAL_NOTE_TENSOR_CORE:
      return "tensor_core";
    case CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS:
      return "down_convert_inputs";
    case CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION:
      return "reduced_precision_reduction";
    case CUDNN_NUMERICAL_NOTE_FFT:
      return "fft";
    case CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC:
      return "nondeterministic";
    case CUDNN_NUMERICAL_NOTE_WINOGRAD:
      return "winograd";
    case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4:
      return "winograd_4x4";
    case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_6x6:
      return "winograd_6x6";
    case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_13x13:
      return "winograd_13x13";
    default:
      return nullptr;  // a later note (STRICT_NAN_PROP in cuDNN 9): named by its number
  }
}

// Whether the engine carries the RUNTIME_COMPILATION behaviour note: its kernel is generated and
// compiled (NVRTC) when its plan is finalized, seconds per plan, which a search of every shape
// would multiply. Those are cuDNN's runtime fusion engines, made for fused graphs; a plain
// convolution has precompiled engines. A library that does not answer the attribute (cuDNN
// before 8.2) is taken to have none.
bool compiled_at_run_time(const BackendDescriptor& engine) {
#if CUDNN_VERSION >= 8200
  std::array<cudnnBackendBehaviorNote_t, CUDNN_BEHAVIOR_NOTE_TYPE_COUNT> notes{};
  int64_t n = 0;
  if (cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                               static_cast<int64_t>(notes.size()), &n, notes.data()) != CUDNN_STATUS_SUCCESS)
    return false;
  n = std::min<int64_t>(n, static_cast<int64_t>(notes.size()));
  for (int64_t i = 0; i < n; ++i)
    if (notes[static_cast<std::size_t>(i)] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) return true;
#else
  (void)engine;
#endif
  return false;
}

}  // namespace

EngineInfo engine_of(const BackendDescriptor& config) {
  BackendDescriptor engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR, "engine");
  cudnnBackendDescriptor_t raw = engine.get();
  int64_t count = 0;
  get(config, CUDNN_ATTR_ENGINECFG_ENGINE, "ENGINE", CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count, &raw);
  EngineInfo info;
  get(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, "GLOBAL_INDEX", CUDNN_TYPE_INT64, 1, &count, &info.global_index);
  // As many as this header knows, as cudnn-frontend asks (a newer library's extra notes are
  // left out; the rule reads only the ones named here).
  std::array<cudnnBackendNumericalNote_t, CUDNN_NUMERICAL_NOTE_TYPE_COUNT> notes{};
  int64_t n = 0;
  get(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, "NUMERICAL_NOTE", CUDNN_TYPE_NUMERICAL_NOTE,
      static_cast<int64_t>(notes.size()), &n, notes.data());
  n = std::min<int64_t>(n, static_cast<int64_t>(notes.size()));
  for (int64_t i = 0; i < n; ++i) {
    const cudnnBackendNumericalNote_t note = notes[static_cast<std::size_t>(i)];
    info.tensor_core |= note == CUDNN_NUMERICAL_NOTE_TENSOR_CORE;
    info.nondeterministic |= note == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC;
    info.down_convert |= note == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS;
    info.reduced_precision_reduction |= note == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION;
    const char* name = note_name(note);
    info.notes += (info.notes.empty() ? "" : ",") + (name ? std::string(name) : "note" + std::to_string(note));
  }
  info.runtime_compilation = compiled_at_run_time(engine);
  if (info.runtime_compilation) info.notes += std::string(info.notes.empty() ? "" : ",") + "runtime_compilation";
  return info;
}

namespace {

// Why the legacy path's rule refuses an engine, or nullptr. fp32 means fp32 unless --tf32 (no
// tensor cores, no inputs converted down to TF32); 16-bit data may use tensor cores but not inputs
// converted below its format; the accumulation is fp32 in every case. And no engine compiled at
// run time (compiled_at_run_time).
const char* refused_by_notes(const EngineInfo& e, const GraphPlanRequest& r) {
  const bool fp32 = r.data == CUDNN_DATA_FLOAT;
  if (e.runtime_compilation) return "runtime_compilation";
  if (e.reduced_precision_reduction) return "reduced_precision_reduction";
  if (fp32 && !r.tf32 && e.tensor_core) return "tensor_core";
  if (e.down_convert && !(fp32 && r.tf32)) return "down_convert_inputs";
  return nullptr;
}

}  // namespace

// "type=value,..." of an engine configuration's knob choices (cudnnBackendKnobType_t numbers), for
// the record only: empty where cuDNN does not say.
std::string knob_choices(const BackendDescriptor& config) {
  try {
    std::vector<BackendDescriptor> knobs;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (int i = 0; i < CUDNN_KNOB_TYPE_COUNTS; ++i) {
      knobs.emplace_back(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, "knob choice");
      raw.push_back(knobs.back().get());
    }
    int64_t count = 0;
    get(config, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, "KNOB_CHOICES", CUDNN_TYPE_BACKEND_DESCRIPTOR,
        static_cast<int64_t>(raw.size()), &count, raw.data());
    std::ostringstream os;
    for (int64_t i = 0; i < std::min<int64_t>(count, static_cast<int64_t>(knobs.size())); ++i) {
      const BackendDescriptor& knob = knobs[static_cast<std::size_t>(i)];
      cudnnBackendKnobType_t type = CUDNN_KNOB_TYPE_COUNTS;
      int64_t value = 0, n = 0;
      get(knob, CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, "KNOB_TYPE", CUDNN_TYPE_KNOB_TYPE, 1, &n, &type);
      get(knob, CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, "KNOB_VALUE", CUDNN_TYPE_INT64, 1, &n, &value);
      os << (i ? "," : "") << static_cast<int>(type) << "=" << value;
    }
    return os.str();
  } catch (const GraphApiError&) {
    return "";
  }
}

// The engine configurations of one heuristics mode, in cuDNN's order (fastest expected first).
std::vector<BackendDescriptor> heuristic_configs(const BackendDescriptor& graph, cudnnBackendHeurMode_t mode) {
  BackendDescriptor heuristics(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR,
                               mode == CUDNN_HEUR_MODE_A ? "engine heuristics, mode A" : "engine heuristics, fallback");
  heuristics.set_descriptor(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, "OPERATION_GRAPH", graph);
  heuristics.set(CUDNN_ATTR_ENGINEHEUR_MODE, "MODE", CUDNN_TYPE_HEUR_MODE, 1, &mode);
  heuristics.finalize();
  int64_t count = 0;
  get(heuristics, CUDNN_ATTR_ENGINEHEUR_RESULTS, "RESULTS (count)", CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr);
  std::vector<BackendDescriptor> configs;
  if (count <= 0) return configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine configuration");
    raw.push_back(configs.back().get());
  }
  int64_t got = 0;
  get(heuristics, CUDNN_ATTR_ENGINEHEUR_RESULTS, "RESULTS", CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, raw.data());
  configs.resize(static_cast<std::size_t>(std::clamp<int64_t>(got, 0, count)));
  return configs;
}

namespace {

// One heuristics mode's configurations that the rule lets through, with their engines, and what
// became of the others (for the reason a shape falls back).
struct Config {
  BackendDescriptor config;
  EngineInfo engine;
  bool tried = false;
};

struct Tally {
  int offered = 0, refused = 0, not_finalized = 0, over_workspace = 0;
  std::string last_failure;  // the last configuration's refusal, with its engine
};

std::vector<Config> allowed_configs(const BackendDescriptor& graph, cudnnBackendHeurMode_t mode,
                                    const GraphPlanRequest& r, Tally& tally) {
  std::vector<Config> allowed;
  for (BackendDescriptor& c : heuristic_configs(graph, mode)) {
    ++tally.offered;
    EngineInfo e;
    try {
      e = engine_of(c);
    } catch (const GraphApiError& error) {
      ++tally.not_finalized;
      tally.last_failure = error.what();
      continue;
    }
    if (const char* why = refused_by_notes(e, r)) {
      ++tally.refused;
      tally.last_failure = "engine " + std::to_string(e.global_index) + " refused: " + why;
      continue;
    }
    allowed.push_back({std::move(c), std::move(e)});
  }
  return allowed;
}

// A finalized plan of configs[index] within the workspace limit.
struct Finalized {
  std::size_t index = 0;
  BackendDescriptor plan;
  std::size_t workspace_bytes = 0;
  float time_ms = -1.0f;
};

bool finalize_plan(cudnnHandle_t handle, Config& c, std::size_t index, std::size_t max_workspace_bytes,
                   std::vector<Finalized>& out, Tally& tally) {
  c.tried = true;
  const std::string engine = "engine " + std::to_string(c.engine.global_index) + ": ";
  try {
    BackendDescriptor plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, "execution plan");
    plan.set_descriptor(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, "ENGINE_CONFIG", c.config);
    offer_handle(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, handle);
    plan.finalize();
    int64_t workspace = 0, n = 0;
    get(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, "WORKSPACE_SIZE", CUDNN_TYPE_INT64, 1, &n, &workspace);
    if (workspace < 0 || static_cast<std::size_t>(workspace) > max_workspace_bytes) {
      ++tally.over_workspace;
      tally.last_failure = engine + "wants " + std::to_string(workspace >> 20) + " MiB of workspace";
      return false;
    }
    out.push_back({index, std::move(plan), static_cast<std::size_t>(workspace)});
    return true;
  } catch (const GraphApiError& error) {
    ++tally.not_finalized;
    tally.last_failure = engine + error.what();
    return false;
  }
}

// Finalizes the untried configurations that `wanted` accepts, in cuDNN's order, until `out` holds
// `limit` plans.
template <typename Wanted>
void finalize_in_order(cudnnHandle_t handle, std::vector<Config>& configs, Wanted wanted, std::size_t limit,
                       std::size_t max_workspace_bytes, std::vector<Finalized>& out, Tally& tally) {
  for (std::size_t i = 0; i < configs.size() && out.size() < limit; ++i)
    if (!configs[i].tried && wanted(configs[i].engine))
      finalize_plan(handle, configs[i], i, max_workspace_bytes, out, tally);
}

bool deterministic(const EngineInfo& e) { return !e.nondeterministic; }
bool any(const EngineInfo&) { return true; }

// The plans a choice is made from: without search the first that finalizes (backward: the first
// deterministic one where one finalizes); with search up to kMaxTimedPlans in cuDNN's order, and
// for backward one deterministic plan more where none of those is.
std::vector<Finalized> candidate_plans(cudnnHandle_t handle, std::vector<Config>& configs, const GraphPlanRequest& r,
                                       Tally& tally) {
  std::vector<Finalized> plans;
  const std::size_t max_ws = r.max_workspace_bytes;
  if (!r.search) {
    if (r.prefer_deterministic) finalize_in_order(handle, configs, deterministic, 1, max_ws, plans, tally);
    finalize_in_order(handle, configs, any, 1, max_ws, plans, tally);
    return plans;
  }
  finalize_in_order(handle, configs, any, kMaxTimedPlans, max_ws, plans, tally);
  const bool has_deterministic = std::any_of(
      plans.begin(), plans.end(), [&](const Finalized& p) { return deterministic(configs[p.index].engine); });
  if (r.prefer_deterministic && !has_deterministic)
    finalize_in_order(handle, configs, deterministic, plans.size() + 1, max_ws, plans, tally);
  return plans;
}

// ---- the search ----------------------------------------------------------------------------------

// One run of a plan: a variant pack naming the three operands and the workspace, then
// cudnnBackendExecute on the handle's stream. A refused step returns its status.
cudnnStatus_t execute_plan(cudnnHandle_t handle, const BackendDescriptor& plan, const void* x, const void* w,
                           const void* y, void* workspace) {
  try {
    BackendDescriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variant pack");
    void* pointers[3] = {const_cast<void*>(x), const_cast<void*>(w), const_cast<void*>(y)};
    const int64_t uids[3] = {kXUid, kWUid, kYUid};
    pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, "DATA_POINTERS", CUDNN_TYPE_VOID_PTR, 3, pointers);
    pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, "UNIQUE_IDS", CUDNN_TYPE_INT64, 3, uids);
    pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, "WORKSPACE", CUDNN_TYPE_VOID_PTR, 1, &workspace);
    pack.finalize();
    return cudnnBackendExecute(handle, plan.get(), pack.get());
  } catch (const GraphApiError& e) {
    return e.status();
  }
}

DType dtype_of(cudnnDataType_t type) {
  return type == CUDNN_DATA_HALF ? DType::f16 : type == CUDNN_DATA_BFLOAT16 ? DType::bf16 : DType::f32;
}

class CudaEvent {
 public:
  CudaEvent() { ST_CHECK_CUDA(cudaEventCreate(&event_)); }
  ~CudaEvent() { cudaEventDestroy(event_); }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// Each plan's time per run on the compute stream: one warm-up run (lazy module loading, caches),
// then kTimedRuns between two events, waited for here. Operands are zeroed buffers of the caching
// allocator in the plan's type, the workspace the Context's. A plan whose run fails keeps -1.
void time_plans(Context& ctx, const ConvGeometry& g, const GraphPlanRequest& r, std::vector<Finalized>& plans) {
  const DType type = dtype_of(r.data);
  Tensor x = Tensor::empty({g.n * g.h * g.w * g.c}, type, Device::cuda);
  Tensor w = Tensor::empty({g.o * g.kh * g.kw * g.c}, type, Device::cuda);
  Tensor y = Tensor::empty({g.n * g.oh * g.ow * g.o}, type, Device::cuda);
  x.zero(), w.zero(), y.zero();
  std::size_t workspace_bytes = 0;
  for (const Finalized& p : plans) workspace_bytes = std::max(workspace_bytes, p.workspace_bytes);
  void* workspace = scaletrain::cuda::workspace(ctx, workspace_bytes);
  const cudaStream_t stream = scaletrain::cuda::compute_stream(ctx);
  const cudnnHandle_t handle = scaletrain::cuda::cudnn_handle(ctx);
  CudaEvent start, stop;
  for (Finalized& p : plans) {
    bool ran = execute_plan(handle, p.plan, x.raw(), w.raw(), y.raw(), workspace) == CUDNN_STATUS_SUCCESS;
    ST_CHECK_CUDA(cudaEventRecord(start.get(), stream));
    for (int k = 0; ran && k < kTimedRuns; ++k)
      ran = execute_plan(handle, p.plan, x.raw(), w.raw(), y.raw(), workspace) == CUDNN_STATUS_SUCCESS;
    ST_CHECK_CUDA(cudaEventRecord(stop.get(), stream));
    ST_CHECK_CUDA(cudaEventSynchronize(stop.get()));
    float ms = 0.0f;
    ST_CHECK_CUDA(cudaEventElapsedTime(&ms, start.get(), stop.get()));
    p.time_ms = ran ? ms / kTimedRuns : -1.0f;
    (void)cudaGetLastError();  // a refused run may leave the runtime's last error set
  }
}

// The timed plans as candidates of the legacy rule (conv_algorithm.hpp), fastest first: the first
// usable one runs (backward: the first deterministic one where there is one), and the fastest of
// any determinism is recorded beside it. Returns the chosen plan's index into `plans`, or -1.
int choose_timed(const std::vector<Config>& configs, const std::vector<Finalized>& plans, const GraphPlanRequest& r,
                 ConvSearchTimes& times) {
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < plans.size(); ++i)
    if (plans[i].time_ms >= 0) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return plans[a].time_ms < plans[b].time_ms; });
  std::vector<ConvCandidate> candidates;
  for (std::size_t i : order) {
    const EngineInfo& e = configs[plans[i].index].engine;
    candidates.push_back({static_cast<int>(e.global_index), true, e.tensor_core ? ConvMath::tensor_op : ConvMath::fma,
                          plans[i].workspace_bytes, deterministic(e), plans[i].time_ms});
  }
  const bool any_math = r.tf32 || r.data != CUDNN_DATA_FLOAT;
  const ConvChoice choice = choose_conv_algorithm(candidates, r.prefer_deterministic, any_math, r.max_workspace_bytes);
  if (choice.index < 0) return -1;
  times = conv_search_times(candidates, choice, any_math, r.max_workspace_bytes);
  return static_cast<int>(order[static_cast<std::size_t>(choice.index)]);
}

// Without a search (or after a failed one): the first deterministic plan where preferred and
// there is one, else the first.
int choose_first(const std::vector<Config>& configs, const std::vector<Finalized>& plans, const GraphPlanRequest& r) {
  if (r.prefer_deterministic)
    for (std::size_t i = 0; i < plans.size(); ++i)
      if (deterministic(configs[plans[i].index].engine)) return static_cast<int>(i);
  return plans.empty() ? -1 : 0;
}

std::string tally_text(const char* mode, const Tally& t) {
  std::ostringstream os;
  os << mode << ": " << t.offered << " configuration(s)";
  if (t.refused) os << ", " << t.refused << " refused by their numerical notes";
  if (t.not_finalized) os << ", " << t.not_finalized << " not finalized";
  if (t.over_workspace) os << ", " << t.over_workspace << " over the workspace limit";
  if (!t.last_failure.empty()) os << " (last: " << t.last_failure << ")";
  return os.str();
}

// The plan of one heuristics mode's configurations, or none (`tally` says why).
std::unique_ptr<GraphPlan> plan_from_mode(Context& ctx, const ConvGeometry& g, const GraphPlanRequest& r,
                                          const BackendDescriptor& graph, cudnnBackendHeurMode_t mode, Tally& tally) {
  const cudnnHandle_t handle = scaletrain::cuda::cudnn_handle(ctx);
  std::vector<Config> configs = allowed_configs(graph, mode, r, tally);
  std::vector<Finalized> plans = candidate_plans(handle, configs, r, tally);
  if (plans.empty()) return nullptr;
  auto result = std::make_unique<GraphPlan>();
  int chosen = -1;
  if (r.search) {
    try {
      time_plans(ctx, g, r, plans);
      chosen = choose_timed(configs, plans, r, result->search);
      if (chosen < 0) {  // every plan's run was refused: none is taken untried
        tally.last_failure = "none of the " + std::to_string(plans.size()) + " timed plan(s) ran";
        return nullptr;
      }
      result->chosen_by = "graph-search";
    } catch (const std::exception& e) {  // its buffers did not fit, say: the heuristics' order decides
      (void)cudaGetLastError();
      result->chosen_by = std::string("graph (the search failed: ") + e.what() + ")";
    }
  }
  if (chosen < 0) chosen = choose_first(configs, plans, r);
  Finalized& p = plans[static_cast<std::size_t>(chosen)];
  Config& c = configs[p.index];
  result->plan = std::move(p.plan);
  result->workspace_bytes = p.workspace_bytes;
  result->engine = c.engine;
  result->knobs = knob_choices(c.config);
  result->keep.push_back(std::move(c.config));
  if (mode == CUDNN_HEUR_MODE_FALLBACK) result->chosen_by += " (fallback heuristics)";
  return result;
}

// plan_from_mode, a refused step of that mode's (its heuristics, say) noted in its tally, so that
// the fallback mode is still asked after mode A fails.
std::unique_ptr<GraphPlan> plan_or_none(Context& ctx, const ConvGeometry& g, const GraphPlanRequest& r,
                                        const BackendDescriptor& graph, cudnnBackendHeurMode_t mode, Tally& tally) {
  try {
    return plan_from_mode(ctx, g, r, graph, mode, tally);
  } catch (const GraphApiError& e) {
    tally.last_failure = e.what();
    return nullptr;
  }
}

}  // namespace

GraphPlanResult make_conv_graph_plan(Context& ctx, const ConvGeometry& g, const GraphPlanRequest& request) {
  GraphPlanResult result;
  try {
    const cudnnHandle_t handle = scaletrain::cuda::cudnn_handle(ctx);
    std::vector<BackendDescriptor> keep;
    keep.push_back(channels_last_tensor("x tensor", kXUid, request.data, g.n, g.c, g.h, g.w));
    keep.push_back(channels_last_tensor("w tensor", kWUid, request.data, g.o, g.c, g.kh, g.kw));
    keep.push_back(channels_last_tensor("y tensor", kYUid, request.data, g.n, g.o, g.oh, g.ow));
    keep.push_back(convolution(g));
    keep.push_back(convolution_operation(request.direction, keep[0], keep[1], keep[2], keep[3]));
    keep.push_back(operation_graph(handle, {&keep[4]}));
    const BackendDescriptor& graph = keep[5];
    Tally a, fallback;
    std::unique_ptr<GraphPlan> plan = plan_or_none(ctx, g, request, graph, CUDNN_HEUR_MODE_A, a);
    if (!plan) plan = plan_or_none(ctx, g, request, graph, CUDNN_HEUR_MODE_FALLBACK, fallback);
    if (!plan) {
      result.why_not = "no engine finalized; " + tally_text("mode A", a) + "; " + tally_text("fallback", fallback);
      return result;
    }
    for (BackendDescriptor& d : keep) plan->keep.push_back(std::move(d));
    result.plan = std::move(plan);
  } catch (const std::exception& e) {
    (void)cudaGetLastError();
    result.plan.reset();
    result.why_not = e.what();
  }
  return result;
}

cudnnStatus_t execute_graph_plan(cudnnHandle_t handle, const GraphPlan& plan, const void* x, const void* w,
                                 const void* y, void* workspace) {
  return execute_plan(handle, plan.plan, x, w, y, workspace);
}

}  // namespace scaletrain::ops::cuda::graph
