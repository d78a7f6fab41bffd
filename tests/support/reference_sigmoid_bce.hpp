// Test support: naive float64 binary cross-entropy on logits, written from the definition
//   loss_i = -(y log s(x) + (1 - y) log(1 - s(x))),  s(x) = 1 / (1 + exp(-x)),
// mean over the batch, rather than from the stable form the kernel uses (so the two check each
// other); only for moderate |x|, where the definition is accurate in double.
#pragma once

#include <vector>

namespace scaletrain::test {

// The mean loss; when `dlogits` is not null it receives d(mean loss)/d(logits).
double reference_sigmoid_bce(const std::vector<double>& logits, const std::vector<double>& targets,
                             std::vector<double>* dlogits = nullptr);

}  // namespace scaletrain::test
