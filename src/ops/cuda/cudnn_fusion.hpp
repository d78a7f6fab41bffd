// Private: cuDNN's runtime fusion of a convolution with the batch norms around it (issue 26,
// section 3; the graph NVIDIA's MLPerf ResNet-50 runs on Ampere and Hopper, "ConvBNfprop"):
//
//   x (16-bit, NHWC) -> [x * scale + bias -> ReLU] -> convolution with w -> y (16-bit, NHWC)
//                                                                         -> genstats: sum, sqsum
//
// The bracket is the prologue: the previous batch norm, folded into a per-channel scale and bias
// (fp32), and its ReLU, applied as the convolution loads x, so that batch norm's output is never
// written. genstats gives y's per-channel sum and sum of squares (fp32) as the convolution
// stores y, so that the next batch norm need not read y for its statistics. One operation graph
// (pointwise MUL, ADD, RELU_FWD, CONVOLUTION_FORWARD, GEN_STATS); its intermediates are virtual.
//
// cuDNN offers such graphs to its runtime fusion engines (compiled with NVRTC when a plan is
// finalized, seconds each) and, on some GPUs and shapes, to precompiled specialized engines.
// Neither is known to accept every shape: make_conv_bn_stats_plan tries the virtual intermediates
// in FLOAT then in the data type, and says why where no engine finalizes; the caller then runs
// the three steps apart (conv2d_bn_stats_cuda.cu). Includes the CUDA headers: .cu files only.
#pragma once

#include "ops/cuda/cudnn_graph.hpp"

namespace scaletrain::ops::cuda::graph {

struct ConvBnStatsRequest {
  ConvGeometry g;
  cudnnDataType_t data = CUDNN_DATA_HALF;  // x, w and y; scale, bias, sum and sqsum are FLOAT
  bool prologue = true;                    // the scale, bias and ReLU before the convolution
  std::size_t max_workspace_bytes = 0;
};

// A finalized plan of the fused graph, with what cuDNN chose and how long making it took (a
// runtime-compiled engine's compilation is in it).
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

// Never throws: a refused step or no engine that finalizes is the result's why_not. Runtime
// compiled engines are allowed here (they are what runs fused graphs); reduced-precision
// reductions and inputs converted down are not, as for the plain convolutions.
FusedPlanResult make_conv_bn_stats_plan(Context& ctx, const ConvBnStatsRequest& request);

// Runs the plan on the handle's stream. scale and bias are ignored without a prologue. Returns
// cuDNN's status.
cudnnStatus_t execute_conv_bn_stats(cudnnHandle_t handle, const FusedPlan& plan, const void* x, const float* scale,
                                    const float* bias, const void* w, void* y, float* sum, float* sqsum,
                                    void* workspace);

}  // namespace scaletrain::ops::cuda::graph
