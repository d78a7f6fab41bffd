// Private: one convolution (forward, backward data or backward filter) through cuDNN's graph
// (backend) API, the path PyTorch's cuDNN convolutions take: an operation graph of one
// convolution, cuDNN's engine heuristics, and a finalized execution plan run with a variant pack.
// The legacy API (cudnnGetConvolution*Algorithm_v7, cudnnFind*, cudnnConvolution*) reaches only
// the engines behind its algorithm enums; the graph API offers every engine cuDNN has for the
// shape (--conv-algo graph | graph-search; conv2d_cuda.cu keeps the legacy plan beside it as the
// fallback).
//
// What is asked of cuDNN, as conv2d_cuda.cu's legacy descriptors ask it:
//   x, y: (N, C, H, W) dims with channels-last strides (NHWC memory); the filter: (O, C, KH, KW)
//   dims with OHWI strides (the transposed filter conv2d_cuda.cu hands cuDNN); data FLOAT, HALF or
//   BFLOAT16; compute type FLOAT; cross-correlation, dilation 1, symmetric padding; one group
//   (grouped shapes stay legacy: conv2d_cuda.cu does not ask for them).
//   Every operand 16-byte aligned (CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT): engines may load 16 bytes at
//   a time; graph_aligned() says whether a call's pointers are (else the legacy plan runs it).
//
// Which engine: the configurations of CUDNN_HEUR_MODE_A, or of CUDNN_HEUR_MODE_FALLBACK where none
// of A's finalizes, less those whose numerical notes break the legacy path's rule (fp32 without
// TF32: no TENSOR_CORE, no DOWN_CONVERT_INPUTS; 16-bit: no DOWN_CONVERT_INPUTS; never
// REDUCED_PRECISION_REDUCTION, since the accumulation must stay fp32; never an engine with the
// RUNTIME_COMPILATION behaviour note, compiled when finalized) and those whose workspace
// exceeds the caller's limit. Backward prefers an engine without NONDETERMINISTIC where one
// finalizes. With search the first kMaxTimedPlans usable plans are timed on the compute stream
// (one warm-up run, then kTimedRuns between CUDA events), synchronously, on buffers of the caching
// allocator and the Context's workspace, and the same rule (choose_conv_algorithm) takes the
// fastest, as cudnnFind* does for the legacy search.
//
// Nothing here throws to the caller while planning: make_conv_graph_plan returns either a plan or
// why there is none (the step and cuDNN's status), and the caller runs that shape the legacy way.
// Includes the CUDA headers, so only .cu files include it.
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "scaletrain/backend/context.hpp"
#include "scaletrain/ops/conv_algorithm.hpp"

namespace scaletrain::ops::cuda::graph {

// A step of the graph API that cuDNN refused: the call, the descriptor and attribute, its status.
class GraphApiError : public std::runtime_error {
 public:
  GraphApiError(const std::string& what, cudnnStatus_t status) : std::runtime_error(what), status_(status) {}
  cudnnStatus_t status() const { return status_; }

 private:
  cudnnStatus_t status_;
};

// Owns one cudnnBackendDescriptor_t (destroyed on every path). Every call names the descriptor and
// the attribute in the GraphApiError it throws, so a fallback's reason says which step cuDNN refused.
class BackendDescriptor {
 public:
  BackendDescriptor() = default;  // none yet
  BackendDescriptor(cudnnBackendDescriptorType_t type, const char* what);
  ~BackendDescriptor();
  BackendDescriptor(BackendDescriptor&& other) noexcept;
  BackendDescriptor& operator=(BackendDescriptor&& other) noexcept;
  BackendDescriptor(const BackendDescriptor&) = delete;
  BackendDescriptor& operator=(const BackendDescriptor&) = delete;

  cudnnBackendDescriptor_t get() const { return desc_; }
  const char* what() const { return what_; }
  // cudnnBackendSetAttribute; `name` is the attribute's, for the error.
  void set(cudnnBackendAttributeName_t attribute, const char* name, cudnnBackendAttributeType_t type, int64_t count,
           const void* values);
  void set_descriptor(cudnnBackendAttributeName_t attribute, const char* name, const BackendDescriptor& value);
  void finalize();
  cudnnStatus_t try_finalize();  // for the engine configurations that may not finalize

 private:
  cudnnBackendDescriptor_t desc_ = nullptr;
  const char* what_ = "";
};

enum class ConvDirection { forward, backward_data, backward_filter };

// One convolution's sizes: x (N, C, H, W), the filter (O, C, KH, KW), y (N, O, OH, OW).
struct ConvGeometry {
  int64_t n = 0, c = 0, h = 0, w = 0, o = 0, kh = 0, kw = 0, oh = 0, ow = 0;
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
};

struct GraphPlanRequest {
  ConvDirection direction = ConvDirection::forward;
  cudnnDataType_t data = CUDNN_DATA_FLOAT;  // x, w and y; the compute type is FLOAT
  bool tf32 = false;                        // fp32 data may run on tensor cores (--tf32)
  bool prefer_deterministic = false;        // backward data and filter, as the legacy rule
  bool search = false;                      // time the usable plans (--conv-algo graph-search)
  std::size_t max_workspace_bytes = 0;
};

// What one engine configuration runs.
struct EngineInfo {
  int64_t global_index = -1;
  bool tensor_core = false;
  bool nondeterministic = false;
  bool down_convert = false;
  bool reduced_precision_reduction = false;
  bool runtime_compilation = false;  // the RUNTIME_COMPILATION behaviour note: refused
  std::string notes;                 // the numerical notes, comma-separated ("tensor_core,winograd")
};

// A finalized execution plan, the descriptors it was built from kept alive with it (cuDNN does not
// promise that a plan outlives the graph it was made from). Immutable once made.
struct GraphPlan {
  std::vector<BackendDescriptor> keep;  // tensors, convolution, operation, graph, engine config
  BackendDescriptor plan;
  EngineInfo engine;
  std::string knobs;  // the engine configuration's knob choices, "type=value,..."
  std::size_t workspace_bytes = 0;
  std::string chosen_by = "graph";  // graph | graph-search | graph (the search failed: ...)
  ConvSearchTimes search;           // a search's times, the engines' global indices as algorithms
};

// A plan, or why there is none (`why_not`: the step and cuDNN's status).
struct GraphPlanResult {
  std::unique_ptr<GraphPlan> plan;
  std::string why_not;
};

// Never throws: any failure (a refused attribute, no engine that finalizes, a search whose buffers
// do not fit) is the result's why_not.
GraphPlanResult make_conv_graph_plan(Context& ctx, const ConvGeometry& g, const GraphPlanRequest& request);

// The three operands' byte alignment the plans are made for.
constexpr std::size_t kOperandAlignment = 16;
inline bool graph_aligned(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % kOperandAlignment == 0; }

// Runs the plan on the compute stream (the handle's): x (dx for backward data), w (dw for backward
// filter) and y (dy for the backward passes) in the plan's data type, `workspace` of at least the
// plan's workspace_bytes. Returns cuDNN's status.
cudnnStatus_t execute_graph_plan(cudnnHandle_t handle, const GraphPlan& plan, const void* x, const void* w,
                                 const void* y, void* workspace);

// ---- Building blocks, shared with the fused graphs (cudnn_fusion.hpp) -----------------------------

// Throws GraphApiError naming the call, the descriptor and the attribute where `status` is not
// success.
void check(cudnnStatus_t status, const char* call, const char* what, const char* attribute = nullptr);
// cudnnBackendGetAttribute, checked.
void get(const BackendDescriptor& d, cudnnBackendAttributeName_t attribute, const char* name,
         cudnnBackendAttributeType_t type, int64_t requested, int64_t* count, void* values);
// The handle attribute where the library takes it (cuDNN 8 needs it; 9 deprecates it).
void offer_handle(const BackendDescriptor& d, cudnnBackendAttributeName_t attribute, cudnnHandle_t handle);
// A tensor of logical dims (a, b, c, d) = (N, C, H, W) or (O, C, KH, KW), laid out in memory as
// (a, c, d, b): NHWC activations, the OHWI filter, and (1, C, 1, 1) per-channel vectors. Virtual:
// an intermediate of a fused graph that never reaches memory.
BackendDescriptor channels_last_tensor(const char* what, int64_t uid, cudnnDataType_t type, int64_t a, int64_t b,
                                       int64_t c, int64_t d, bool is_virtual = false);
// The convolution descriptor of `g` (cross-correlation, dilation 1, symmetric padding, FLOAT compute).
BackendDescriptor convolution(const ConvGeometry& g);
// The operation of one direction: result = 1 * conv + 0 * result.
BackendDescriptor convolution_operation(ConvDirection direction, const BackendDescriptor& x, const BackendDescriptor& w,
                                        const BackendDescriptor& y, const BackendDescriptor& conv);
BackendDescriptor operation_graph(cudnnHandle_t handle, const std::vector<const BackendDescriptor*>& ops);
// An engine configuration's engine: its global index, notes and behaviour.
EngineInfo engine_of(const BackendDescriptor& config);
// "type=value,..." of its knob choices, "" where cuDNN does not say.
std::string knob_choices(const BackendDescriptor& config);
// The engine configurations of one heuristics mode for a finalized operation graph, in cuDNN's
// order (fastest expected first).
std::vector<BackendDescriptor> heuristic_configs(const BackendDescriptor& graph, cudnnBackendHeurMode_t mode);

}  // namespace scaletrain::ops::cuda::graph
