// Test support: naive float64 concatenation of (N, A) and (N, B) into (N, A + B), and of (rows, C_i)
// parts into (rows, sum C_i), and their splits.
#pragma once

#include <cstdint>
#include <vector>

namespace scaletrain::test {

std::vector<double> reference_concat_features(int64_t n, int64_t wa, int64_t wb, const std::vector<double>& a,
                                              const std::vector<double>& b);
// da (N, A) and db (N, B) from dy (N, A + B).
void reference_split_features(int64_t n, int64_t wa, int64_t wb, const std::vector<double>& dy, std::vector<double>& da,
                              std::vector<double>& db);

// parts[i]: (rows, widths[i]). Returns (rows, sum widths).
std::vector<double> reference_concat_channels(int64_t rows, const std::vector<int64_t>& widths,
                                              const std::vector<std::vector<double>>& parts);
// The parts (rows, widths[i]) of dy (rows, sum widths).
std::vector<std::vector<double>> reference_split_channels(int64_t rows, const std::vector<int64_t>& widths,
                                                          const std::vector<double>& dy);

}  // namespace scaletrain::test
