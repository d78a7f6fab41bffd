// Test support: naive float64 embedding lookup and its gradient. table (V, D) row-major,
// indices (N), out / dout (N, D).
#pragma once

#include <cstdint>
#include <vector>

namespace scaletrain::test {

// out[n, :] = table[indices[n], :].
std::vector<double> reference_embedding_forward(int64_t rows, int64_t d, const std::vector<double>& table,
                                                const std::vector<int32_t>& indices);
// dtable (V, D): zero, then dout[n, :] added to row indices[n] for every n.
std::vector<double> reference_embedding_backward(int64_t rows, int64_t d, const std::vector<int32_t>& indices,
                                                 const std::vector<double>& dout);

}  // namespace scaletrain::test
