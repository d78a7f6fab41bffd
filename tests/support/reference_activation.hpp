// Test support: naive float64 ReLU and element-wise add, forward and backward.
#pragma once

#include <vector>

namespace scaletrain::test {

// y = max(x, 0).
std::vector<double> reference_relu_forward(const std::vector<double>& x);
// dx = dy where the forward output y > 0, else 0.
std::vector<double> reference_relu_backward(const std::vector<double>& y, const std::vector<double>& dy);

// y = a + b. Its backward passes dy unchanged to both inputs, so it needs no reference.
std::vector<double> reference_add(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace scaletrain::test
