// Naive float64 ReLU and add.
#include "support/reference_activation.hpp"

#include "scaletrain/core/error.hpp"

namespace scaletrain::test {

std::vector<double> reference_relu_forward(const std::vector<double>& x) {
  std::vector<double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = x[i] > 0 ? x[i] : 0.0;
  return y;
}

std::vector<double> reference_relu_backward(const std::vector<double>& y, const std::vector<double>& dy) {
  ST_CHECK(y.size() == dy.size(), "reference relu backward: sizes differ");
  std::vector<double> dx(y.size());
  for (std::size_t i = 0; i < y.size(); ++i) dx[i] = y[i] > 0 ? dy[i] : 0.0;
  return dx;
}

std::vector<double> reference_add(const std::vector<double>& a, const std::vector<double>& b) {
  ST_CHECK(a.size() == b.size(), "reference add: sizes differ");
  std::vector<double> y(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) y[i] = a[i] + b[i];
  return y;
}

}  // namespace scaletrain::test
