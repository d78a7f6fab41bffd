// Naive float64 element-wise product.
#include "support/reference_multiply.hpp"

#include "scaletrain/core/error.hpp"

namespace scaletrain::test {

std::vector<double> reference_multiply(const std::vector<double>& a, const std::vector<double>& b) {
  ST_CHECK(a.size() == b.size(), "reference multiply: sizes differ");
  std::vector<double> y(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) y[i] = a[i] * b[i];
  return y;
}

void reference_multiply_backward(const std::vector<double>& a, const std::vector<double>& b,
                                 const std::vector<double>& dy, std::vector<double>& da, std::vector<double>& db) {
  da = reference_multiply(dy, b);
  db = reference_multiply(dy, a);
}

}  // namespace scaletrain::test
