// Which cuDNN convolution algorithm to run, as a plain function of cuDNN's heuristic results, and
// the process's record of what was chosen per shape (report.json's device.conv_algorithms). The
// graph API's engines (--conv-algo graph | graph-search, src/ops/cuda/cudnn_graph.cu) go through
// the same rule: each engine a candidate, its global index as `algo`.
//
// Free of cuDNN headers so that the choice is unit-tested on every machine: src/ops/cuda/
// conv2d_cuda.cu turns cudnnConvolution*AlgoPerf_t into ConvCandidate and back.
//
// The rule. fp32 (no --tf32): a result runs in fp32 when cuDNN reports it with FMA math, or with
// DEFAULT math (cuDNN 9's legacy heuristics may report DEFAULT for an fp32 algorithm: DEFAULT is
// what it was asked with or what the algorithm has no other choice of). Both are usable, and the
// descriptor is then set to FMA: DEFAULT on the descriptor would let Ampere and later run fp32
// data as TF32 on tensor cores. TENSOR_OP results are passed over (they are TF32 for fp32 data).
// --tf32: any math type is usable and the descriptor takes the chosen result's.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace scaletrain::ops {

// cudnnMathType_t's values, in its order (CUDNN_DEFAULT_MATH = 0 ... CUDNN_FMA_MATH = 3).
enum class ConvMath { default_math = 0, tensor_op = 1, tensor_op_allow_conversion = 2, fma = 3 };

const char* conv_math_name(ConvMath math);

// One heuristic result: cuDNN's algorithm number, whether it runs on the descriptors (status
// SUCCESS), its math type, its workspace and whether it is deterministic.
struct ConvCandidate {
  int algo = 0;
  bool runs = false;
  ConvMath math = ConvMath::default_math;
  std::size_t workspace_bytes = 0;
  bool deterministic = false;
  float time_ms = -1.0f;  // a search's measured time (--conv-algo search); -1 for heuristic results
};

struct ConvChoice {
  int index = -1;                            // into the candidates; -1 when none is usable
  ConvMath descriptor_math = ConvMath::fma;  // to set on the convolution descriptor
};

// The first usable candidate (they come ranked by expected speed); with `prefer_deterministic`,
// the first usable deterministic one where there is one (backward data and filter: atomics give
// run-to-run differences in the last bits, which make reruns hard to compare).
ConvChoice choose_conv_algorithm(const std::vector<ConvCandidate>& candidates, bool prefer_deterministic, bool tf32,
                                 std::size_t max_workspace_bytes);

// What a search's preference for a deterministic algorithm costs on one shape: the chosen
// candidate's measured time and the fastest usable one's, determinism aside (PyTorch's
// cudnn.benchmark takes that one). Both -1 where the candidates carry no times (heuristics).
struct ConvSearchTimes {
  double chosen_ms = -1.0, fastest_ms = -1.0;
  int fastest_algo = -1;
};
ConvSearchTimes conv_search_times(const std::vector<ConvCandidate>& candidates, const ConvChoice& chosen, bool tf32,
                                  std::size_t max_workspace_bytes);

// What one convolution shape runs with on this process's GPU: recorded once per plan.
struct ConvAlgorithmRecord {
  std::string direction;  // conv2d_forward, conv2d_backward_data, conv2d_backward_filter
  // input (N, H, W, C), weight (O, C / groups, KH, KW); stride and padding are the height's (the
  // padding of each side: cuDNN pads both equally), stride_w and padding_w the width's.
  int n = 0, h = 0, w = 0, c = 0, o = 0, kh = 0, kw = 0, stride = 0, padding = 0;
  int stride_w = 0, padding_w = 0, groups = 1;
  bool tf32 = false;
  std::string data = "f32";       // the operands' type: f32, or f16 / bf16 under a mixed precision
  int algo = 0;                   // the legacy API's algorithm; -1 where a graph-API engine runs the shape
  ConvMath math = ConvMath::fma;  // the descriptor's (a graph engine: tensor_op where it uses tensor cores)
  std::size_t workspace_bytes = 0;
  bool deterministic = false;
  // heuristic | search (--conv-algo), graph | graph-search (cuDNN's graph API ran it), or a legacy
  // choice with why its search or the graph API fell back, e.g. "heuristic (graph API: ...)".
  std::string chosen_by = "heuristic";
  ConvSearchTimes search;  // a search's times (chosen_by search or graph-search), else -1; after a
                           // graph search fastest_algo is the fastest engine's global index
  // The graph API's engine (chosen_by graph or graph-search): cuDNN's global engine index, its
  // knob choices ("knob type=value" pairs, cudnnBackendKnobType_t numbers) and its numerical
  // notes (tensor_core, winograd, ...); -1 and empty where the legacy API runs the shape.
  int engine = -1;
  std::string engine_knobs, engine_notes;
};

void record_conv_algorithm(const ConvAlgorithmRecord& record);
// Every record so far, in the order the plans were made.
std::vector<ConvAlgorithmRecord> conv_algorithm_records();

}  // namespace scaletrain::ops
