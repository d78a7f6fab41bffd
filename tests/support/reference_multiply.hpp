// Test support: naive float64 element-wise product and its gradient.
#pragma once

#include <vector>

namespace scaletrain::test {

// y = a * b.
std::vector<double> reference_multiply(const std::vector<double>& a, const std::vector<double>& b);
// da = dy * b, db = dy * a.
void reference_multiply_backward(const std::vector<double>& a, const std::vector<double>& b,
                                 const std::vector<double>& dy, std::vector<double>& da, std::vector<double>& db);

}  // namespace scaletrain::test
