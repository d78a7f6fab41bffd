// Naive float64 reference of softmax cross-entropy with label smoothing, as PyTorch's
// CrossEntropyLoss(label_smoothing=eps) with the mean over the batch, for tests only.
// logits (N, K) row-major; labels (N) in [0, K).
#pragma once

#include <cstdint>
#include <vector>

namespace scaletrain::test {

// The mean loss; when `dlogits` is not null it receives d(mean loss)/d(logits), (N, K).
double reference_softmax_cross_entropy(int64_t n, int64_t k, const std::vector<double>& logits,
                                       const std::vector<int32_t>& labels, double label_smoothing,
                                       std::vector<double>* dlogits = nullptr);

}  // namespace scaletrain::test
