// Private: cuDNN's fusion of a convolution with the batch norms around it (issue 26, section 3;
// the graph NVIDIA's MLPerf ResNet-50 runs on Ampere and Hopper, "ConvBNfprop"):
//
//   x (fp16, NHWC) -> [x * scale + bias -> ReLU] -> convolution with w -> y (fp16, NHWC)
//                                                                       -> genstats: sum, sqsum
//
// The bracket is the prologue: the previous batch norm, folded into a per-channel scale and bias
// (fp16, as the engine takes them), and its ReLU, applied as the convolution loads x, so that batch
// norm's output is never written. genstats gives y's per-channel sum and sum of squares (fp32) as
// the convolution stores y, so that the next batch norm need not read y for its statistics. One
// operation graph (pointwise MUL, ADD, RELU_FWD, CONVOLUTION_FORWARD, GEN_STATS); its
// intermediates are virtual.
//
// What runs it is cuDNN's specialized pre-compiled ConvBNfprop engine (the documentation's support
// surface: x, w, y, scale and bias fp16, every pointer 16-byte aligned, compute capability 8.0 or
// above except 8.9; on 9.0 the whole pattern or the convolution with genstats alone); the generic
// runtime fusion engines take pointwise and reduction epilogues, not genstats. So bf16, older GPUs
// and channel counts that are not multiples of 8 are refused before any graph is built, and the
// caller runs the three steps apart (conv_bn_stats_cuda.cu). make_conv_bn_stats_plan tries the
// virtual intermediates in FLOAT (cudnn-frontend's sample of this pattern) then in fp16, and says
// why where no engine finalizes. Includes the CUDA headers: .cu files only.
#pragma once

#include "ops/cuda/cudnn_graph.hpp"

namespace scaletrain::ops::cuda::graph {

struct ConvBnStatsRequest {
  ConvGeometry g;
  cudnnDataType_t data = CUDNN_DATA_HALF;  // x, w, y, scale and bias; sum and sqsum are FLOAT
  bool prologue = true;                    // the scale, bias and ReLU before the convolution
  std::size_t max_workspace_bytes = 0;
};

// A finalized plan of the fused graph, with what cuDNN chose and how long making it took.
struct FusedPlan {
  std::vector<BackendDescriptor> keep;  // the graph's descriptors and the engine configuration
  BackendDescriptor plan;
  EngineInfo engine;
  std::string knobs;
  std::string intermediates;  // the virtual tensors' type: "float" or the data type's name
  std::size_t workspace_bytes = 0;
  double build_seconds = 0.0;
};

struct FusedPlanResult {
  std::unique_ptr<FusedPlan> plan;
  std::string why_not;  // where there is no plan: each attempt's refusal
};

// Why cuDNN's fused engine cannot take such a request on GPU `device` at all (nullptr: it may):
// the data not fp16, a compute capability below 8.0 or 8.9, channels not multiples of 8.
const char* conv_bn_stats_unsupported(int device, const ConvBnStatsRequest& request);

// Never throws: a refused step or no engine that finalizes is the result's why_not. An engine
// with reduced-precision reductions is refused, as for the plain convolutions; one that converts
// the FLOAT intermediate down to fp16 is not (the op rounds it so), nor one compiled at run time.
FusedPlanResult make_conv_bn_stats_plan(Context& ctx, const ConvBnStatsRequest& request);

// Runs the plan on the handle's stream: x, w, y, scale and bias in the data type (scale and bias
// ignored without a prologue). Returns cuDNN's status.
cudnnStatus_t execute_conv_bn_stats(cudnnHandle_t handle, const FusedPlan& plan, const void* x, const void* scale,
                                    const void* bias, const void* w, void* y, float* sum, float* sqsum,
                                    void* workspace);

}  // namespace scaletrain::ops::cuda::graph
