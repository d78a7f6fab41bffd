// Test support: naive float64 concatenation of (N, A) and (N, B) into (N, A + B), and its split.
#pragma once

#include <cstdint>
#include <vector>

namespace scaletrain::test {

std::vector<double> reference_concat_features(int64_t n, int64_t wa, int64_t wb, const std::vector<double>& a,
                                              const std::vector<double>& b);
// da (N, A) and db (N, B) from dy (N, A + B).
void reference_split_features(int64_t n, int64_t wa, int64_t wb, const std::vector<double>& dy, std::vector<double>& da,
                              std::vector<double>& db);

}  // namespace scaletrain::test
