// The convolution fused with batch norms' prologue and statistics through cuDNN's graph API
// (cudnn_fusion.hpp says what and why). The attribute sequences follow the cuDNN backend
// documentation and cudnn-frontend's builders for the pointwise and genstats operations:
//   pointwise: MODE (POINTWISE_MODE: MUL, ADD, RELU_FWD), MATH_PREC (DATA_TYPE FLOAT); its
//     operation: PW_DESCRIPTOR, XDESC, BDESC (the second input of MUL and ADD), YDESC;
//   genstats operation: MODE (GENSTATS_MODE SUM_SQSUM), MATH_PREC (FLOAT), XDESC, SUMDESC,
//     SQSUMDESC;
//   virtual tensors: IS_VIRTUAL (BOOLEAN) on the tensor descriptor.
#include <chrono>
#include <sstream>
#include <utility>

#include "backend/cuda/cuda_context.hpp"
#include "ops/cuda/cudnn_fusion.hpp"

namespace scaletrain::ops::cuda::graph {

namespace {

// The variant pack's names: the three of the plain convolution, then the fused graph's own.
enum Uid : int64_t { kX = 1, kW = 2, kY = 3, kScale = 4, kBias = 5, kSum = 6, kSqsum = 7 };
// The virtual intermediates: x * scale, + bias, ReLU.
enum VirtualUid : int64_t { kScaled = 101, kShifted = 102, kActivated = 103 };
// Configurations finalized per shape at most, over both heuristics modes and both intermediate
// types: a runtime-compiled one would take seconds, and a shape that refuses three is not worth more.
constexpr int kMaxFinalizeAttempts = 3;

BackendDescriptor pointwise(const char* what, cudnnPointwiseMode_t mode) {
  BackendDescriptor d(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, what);
  const cudnnDataType_t precision = CUDNN_DATA_FLOAT;
  d.set(CUDNN_ATTR_POINTWISE_MODE, "MODE", CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
  d.set(CUDNN_ATTR_POINTWISE_MATH_PREC, "MATH_PREC", CUDNN_TYPE_DATA_TYPE, 1, &precision);
  d.finalize();
  return d;
}

// y = mode(x, b) (b: nullptr for a one-input mode).
BackendDescriptor pointwise_operation(const char* what, const BackendDescriptor& mode, const BackendDescriptor& x,
                                      const BackendDescriptor* b, const BackendDescriptor& y) {
  BackendDescriptor op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, what);
  op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, "PW_DESCRIPTOR", mode);
  op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, "XDESC", x);
  if (b != nullptr) op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, "BDESC", *b);
  op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, "YDESC", y);
  const float one = 1.0f;  // the defaults, set as cudnn-frontend sets them
  op.set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, "ALPHA1", CUDNN_TYPE_FLOAT, 1, &one);
  if (b != nullptr) op.set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, "ALPHA2", CUDNN_TYPE_FLOAT, 1, &one);
  op.finalize();
  return op;
}

BackendDescriptor genstats_operation(const BackendDescriptor& y, const BackendDescriptor& sum,
                                     const BackendDescriptor& sqsum) {
  BackendDescriptor op(CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR, "genstats operation");
  const cudnnGenStatsMode_t mode = CUDNN_GENSTATS_SUM_SQSUM;
  const cudnnDataType_t precision = CUDNN_DATA_FLOAT;
  op.set(CUDNN_ATTR_OPERATION_GENSTATS_MODE, "MODE", CUDNN_TYPE_GENSTATS_MODE, 1, &mode);
  op.set(CUDNN_ATTR_OPERATION_GENSTATS_MATH_PREC, "MATH_PREC", CUDNN_TYPE_DATA_TYPE, 1, &precision);
  op.set_descriptor(CUDNN_ATTR_OPERATION_GENSTATS_XDESC, "XDESC", y);
  op.set_descriptor(CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC, "SUMDESC", sum);
  op.set_descriptor(CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC, "SQSUMDESC", sqsum);
  op.finalize();
  return op;
}

// The descriptors of the graph and the finalized graph, last in `keep`.
void build_graph(cudnnHandle_t handle, const ConvBnStatsRequest& r, cudnnDataType_t intermediates,
                 std::vector<BackendDescriptor>& keep) {
  const ConvGeometry& g = r.g;
  keep.reserve(32);  // at most 20: the operations point at the tensors, no reallocation may move them
  auto add = [&keep](BackendDescriptor d) -> const BackendDescriptor& {
    keep.push_back(std::move(d));
    return keep.back();
  };
  const BackendDescriptor& x = add(channels_last_tensor("x tensor", kX, r.data, g.n, g.c, g.h, g.w));
  const BackendDescriptor& w = add(channels_last_tensor("w tensor", kW, r.data, g.o, g.c, g.kh, g.kw));
  const BackendDescriptor& y = add(channels_last_tensor("y tensor", kY, r.data, g.n, g.o, g.oh, g.ow));
  const BackendDescriptor& sum = add(channels_last_tensor("sum tensor", kSum, CUDNN_DATA_FLOAT, 1, g.o, 1, 1));
  const BackendDescriptor& sqsum = add(channels_last_tensor("sqsum tensor", kSqsum, CUDNN_DATA_FLOAT, 1, g.o, 1, 1));
  std::vector<const BackendDescriptor*> ops;
  const BackendDescriptor* conv_input = &x;
  if (r.prologue) {
    const BackendDescriptor& scale = add(channels_last_tensor("scale tensor", kScale, r.data, 1, g.c, 1, 1));
    const BackendDescriptor& bias = add(channels_last_tensor("bias tensor", kBias, r.data, 1, g.c, 1, 1));
    const BackendDescriptor& scaled =
        add(channels_last_tensor("x * scale (virtual)", kScaled, intermediates, g.n, g.c, g.h, g.w, true));
    const BackendDescriptor& shifted =
        add(channels_last_tensor("+ bias (virtual)", kShifted, intermediates, g.n, g.c, g.h, g.w, true));
    const BackendDescriptor& activated =
        add(channels_last_tensor("ReLU (virtual)", kActivated, intermediates, g.n, g.c, g.h, g.w, true));
    const BackendDescriptor& mul = add(pointwise("pointwise MUL", CUDNN_POINTWISE_MUL));
    const BackendDescriptor& plus = add(pointwise("pointwise ADD", CUDNN_POINTWISE_ADD));
    const BackendDescriptor& relu = add(pointwise("pointwise RELU_FWD", CUDNN_POINTWISE_RELU_FWD));
    ops.push_back(&add(pointwise_operation("scale operation", mul, x, &scale, scaled)));
    ops.push_back(&add(pointwise_operation("bias operation", plus, scaled, &bias, shifted)));
    ops.push_back(&add(pointwise_operation("ReLU operation", relu, shifted, nullptr, activated)));
    conv_input = &activated;
  }
  const BackendDescriptor& conv = add(convolution(g));
  ops.push_back(&add(convolution_operation(ConvDirection::forward, *conv_input, w, y, conv)));
  ops.push_back(&add(genstats_operation(y, sum, sqsum)));
  add(operation_graph(handle, ops));
}

// Why an engine may not run the fused graph, or nullptr: the accumulation stays fp32, as for the
// plain convolutions. Unlike theirs, DOWN_CONVERT_INPUTS is allowed: the convolution's one FLOAT
// input is the prologue's virtual output, which the op's contract rounds to fp16 (the tensor
// cores' input); x, w, scale and bias are fp16 already. Runtime compilation is allowed too.
const char* refused(const EngineInfo& e) {
  if (e.reduced_precision_reduction) return "reduced_precision_reduction";
  return nullptr;
}

// The first configuration of `mode` that the rule lets through and that finalizes within the
// workspace limit, or nullptr; `why` collects the refusals.
std::unique_ptr<FusedPlan> first_plan(cudnnHandle_t handle, const BackendDescriptor& graph, cudnnBackendHeurMode_t mode,
                                      std::size_t max_workspace, int& attempts_left, std::string& why) {
  std::vector<BackendDescriptor> configs;
  try {
    configs = heuristic_configs(graph, mode);
  } catch (const GraphApiError& e) {  // this mode's heuristics refused: the next mode may not
    why += std::string("; ") + e.what();
    return nullptr;
  }
  for (BackendDescriptor& config : configs) {
    if (attempts_left == 0) {
      why += "; no more finalize attempts for this shape";
      break;
    }
    EngineInfo engine;
    try {
      engine = engine_of(config);
    } catch (const GraphApiError& e) {
      why += std::string("; ") + e.what();
      continue;
    }
    if (const char* reason = refused(engine)) {
      why += "; engine " + std::to_string(engine.global_index) + " refused: " + reason;
      continue;
    }
    --attempts_left;
    try {
      auto result = std::make_unique<FusedPlan>();
      result->plan = BackendDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, "execution plan");
      result->plan.set_descriptor(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, "ENGINE_CONFIG", config);
      offer_handle(result->plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, handle);
      result->plan.finalize();
      int64_t workspace = 0, n = 0;
      get(result->plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, "WORKSPACE_SIZE", CUDNN_TYPE_INT64, 1, &n,
          &workspace);
      if (workspace < 0 || static_cast<std::size_t>(workspace) > max_workspace) {
        why += "; engine " + std::to_string(engine.global_index) + " wants " + std::to_string(workspace >> 20) +
               " MiB of workspace";
        continue;
      }
      result->workspace_bytes = static_cast<std::size_t>(workspace);
      result->engine = engine;
      result->knobs = knob_choices(config);
      result->keep.push_back(std::move(config));
      return result;
    } catch (const GraphApiError& e) {
      why += "; engine " + std::to_string(engine.global_index) + ": " + e.what();
    }
  }
  return nullptr;
}

const char* type_name(cudnnDataType_t type) {
  return type == CUDNN_DATA_FLOAT ? "float" : type == CUDNN_DATA_HALF ? "half" : "bfloat16";
}

}  // namespace

const char* conv_bn_stats_unsupported(int device, const ConvBnStatsRequest& request) {
  if (request.data != CUDNN_DATA_HALF) return "cuDNN's fused ConvBNfprop engine takes fp16 only";
  if (request.g.c % 8 != 0 || request.g.o % 8 != 0) return "channels not multiples of 8";
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return "the GPU's compute capability is unknown";
  }
  if (major < 8 || (major == 8 && minor == 9)) return "no ConvBNfprop engine below compute capability 8.0, nor on 8.9";
  return nullptr;
}

FusedPlanResult make_conv_bn_stats_plan(Context& ctx, const ConvBnStatsRequest& request) {
  FusedPlanResult result;
  const auto start = std::chrono::steady_clock::now();
  const cudnnHandle_t handle = scaletrain::cuda::cudnn_handle(ctx);
  // Without a prologue there are no intermediates: one attempt.
  std::vector<cudnnDataType_t> types{CUDNN_DATA_FLOAT};
  if (request.prologue) types.push_back(request.data);
  int attempts_left = kMaxFinalizeAttempts;
  for (cudnnDataType_t intermediates : types) {
    if (attempts_left == 0) break;
    std::string why;
    try {
      std::vector<BackendDescriptor> keep;
      build_graph(handle, request, intermediates, keep);
      const BackendDescriptor& graph = keep.back();
      const std::size_t limit = request.max_workspace_bytes;
      std::unique_ptr<FusedPlan> plan = first_plan(handle, graph, CUDNN_HEUR_MODE_A, limit, attempts_left, why);
      if (!plan) plan = first_plan(handle, graph, CUDNN_HEUR_MODE_FALLBACK, limit, attempts_left, why);
      if (plan) {
        for (BackendDescriptor& d : keep) plan->keep.push_back(std::move(d));
        plan->intermediates = type_name(intermediates);
        plan->build_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        result.plan = std::move(plan);
        result.why_not.clear();
        return result;
      }
      if (why.empty()) why = "; no engine configuration offered";
    } catch (const std::exception& e) {
      (void)cudaGetLastError();
      why = std::string("; ") + e.what();
    }
    result.why_not +=
        std::string(result.why_not.empty() ? "" : " | ") + type_name(intermediates) + " intermediates" + why;
  }
  return result;
}

cudnnStatus_t execute_conv_bn_stats(cudnnHandle_t handle, const FusedPlan& plan, const void* x, const void* scale,
                                    const void* bias, const void* w, void* y, float* sum, float* sqsum,
                                    void* workspace) {
  try {
    BackendDescriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variant pack");
    std::vector<void*> pointers{const_cast<void*>(x), const_cast<void*>(w), y, sum, sqsum};
    std::vector<int64_t> uids{kX, kW, kY, kSum, kSqsum};
    if (scale != nullptr) {
      pointers.push_back(const_cast<void*>(scale));
      pointers.push_back(const_cast<void*>(bias));
      uids.push_back(kScale);
      uids.push_back(kBias);
    }
    pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, "DATA_POINTERS", CUDNN_TYPE_VOID_PTR,
             static_cast<int64_t>(pointers.size()), pointers.data());
    pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, "UNIQUE_IDS", CUDNN_TYPE_INT64, static_cast<int64_t>(uids.size()),
             uids.data());
    pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, "WORKSPACE", CUDNN_TYPE_VOID_PTR, 1, &workspace);
    pack.finalize();
    return cudnnBackendExecute(handle, plan.plan.get(), pack.get());
  } catch (const GraphApiError& e) {
    return e.status();
  }
}

}  // namespace scaletrain::ops::cuda::graph
