// Naive float64 embedding lookup and scatter-add.
#include "support/reference_embedding.hpp"

#include "scaletrain/core/error.hpp"

namespace scaletrain::test {

std::vector<double> reference_embedding_forward(int64_t rows, int64_t d, const std::vector<double>& table,
                                                const std::vector<int32_t>& indices) {
  ST_CHECK(static_cast<int64_t>(table.size()) == rows * d, "reference embedding: table size");
  std::vector<double> out;
  for (int32_t r : indices) {
    ST_CHECK(r >= 0 && r < rows, "reference embedding: index " << r << " out of range");
    out.insert(out.end(), table.begin() + r * d, table.begin() + (r + 1) * d);
  }
  return out;
}

std::vector<double> reference_embedding_backward(int64_t rows, int64_t d, const std::vector<int32_t>& indices,
                                                 const std::vector<double>& dout) {
  ST_CHECK(dout.size() == indices.size() * d, "reference embedding backward: dout size");
  std::vector<double> dtable(rows * d, 0.0);
  for (std::size_t n = 0; n < indices.size(); ++n)
    for (int64_t j = 0; j < d; ++j) dtable[indices[n] * d + j] += dout[n * d + j];
  return dtable;
}

}  // namespace scaletrain::test
