// The cuDNN convolution algorithm choice and its record (conv_algorithm.hpp).
#include "scaletrain/ops/conv_algorithm.hpp"

#include <mutex>

namespace scaletrain::ops {

const char* conv_math_name(ConvMath math) {
  switch (math) {
    case ConvMath::default_math:
      return "default";
    case ConvMath::tensor_op:
      return "tensor_op";
    case ConvMath::tensor_op_allow_conversion:
      return "tensor_op_allow_conversion";
    case ConvMath::fma:
      return "fma";
  }
  return "unknown";
}

namespace {

// fp32 math: FMA, or DEFAULT as cuDNN 9's legacy heuristics may report it for fp32 algorithms.
bool runs_in_fp32(ConvMath math) { return math == ConvMath::fma || math == ConvMath::default_math; }

bool usable(const ConvCandidate& c, bool tf32, std::size_t max_workspace_bytes) {
  return c.runs && (tf32 || runs_in_fp32(c.math)) && c.workspace_bytes <= max_workspace_bytes;
}

}  // namespace

ConvChoice choose_conv_algorithm(const std::vector<ConvCandidate>& candidates, bool prefer_deterministic, bool tf32,
                                 std::size_t max_workspace_bytes) {
  ConvChoice choice;
  const int count = static_cast<int>(candidates.size());
  if (prefer_deterministic)
    for (int i = 0; i < count && choice.index < 0; ++i)
      if (usable(candidates[i], tf32, max_workspace_bytes) && candidates[i].deterministic) choice.index = i;
  for (int i = 0; i < count && choice.index < 0; ++i)
    if (usable(candidates[i], tf32, max_workspace_bytes)) choice.index = i;
  if (choice.index >= 0) choice.descriptor_math = tf32 ? candidates[choice.index].math : ConvMath::fma;
  return choice;
}

ConvSearchTimes conv_search_times(const std::vector<ConvCandidate>& candidates, const ConvChoice& chosen, bool tf32,
                                  std::size_t max_workspace_bytes) {
  ConvSearchTimes t;
  if (chosen.index < 0 || candidates[chosen.index].time_ms < 0) return t;
  t.chosen_ms = candidates[chosen.index].time_ms;
  for (const ConvCandidate& c : candidates)  // a search's results are not promised sorted: the least
    if (usable(c, tf32, max_workspace_bytes) && c.time_ms >= 0 && (t.fastest_algo < 0 || c.time_ms < t.fastest_ms)) {
      t.fastest_ms = c.time_ms;
      t.fastest_algo = c.algo;
    }
  return t;
}

namespace {
std::mutex& records_mutex() {
  static std::mutex m;
  return m;
}
std::vector<ConvAlgorithmRecord>& records() {
  static std::vector<ConvAlgorithmRecord> r;
  return r;
}
}  // namespace

void record_conv_algorithm(const ConvAlgorithmRecord& record) {
  std::lock_guard<std::mutex> lock(records_mutex());
  records().push_back(record);
}

std::vector<ConvAlgorithmRecord> conv_algorithm_records() {
  std::lock_guard<std::mutex> lock(records_mutex());
  return records();
}

}  // namespace scaletrain::ops
