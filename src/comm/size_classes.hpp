// Private to src/comm: how both calibrations of --allreduce auto (the host AllReducer's and the
// NCCL reducer's) map a message to the size class they measured.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace scaletrain::comm {

// The row of `table` (non-empty, each row with a `bytes` member) whose size is nearest to `bytes`
// on a log scale; the first of equals.
template <typename Row>
const Row& nearest_size_class(const std::vector<Row>& table, int64_t bytes) {
  const double x = std::log2(static_cast<double>(std::max<int64_t>(bytes, 1)));
  std::size_t best = 0;
  for (std::size_t i = 1; i < table.size(); ++i)
    if (std::fabs(std::log2(static_cast<double>(table[i].bytes)) - x) <
        std::fabs(std::log2(static_cast<double>(table[best].bytes)) - x))
      best = i;
  return table[best];
}

}  // namespace scaletrain::comm
