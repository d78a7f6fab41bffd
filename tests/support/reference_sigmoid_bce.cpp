// Naive float64 binary cross-entropy from its definition.
#include "support/reference_sigmoid_bce.hpp"

#include <cmath>

#include "scaletrain/core/error.hpp"

namespace scaletrain::test {

double reference_sigmoid_bce(const std::vector<double>& logits, const std::vector<double>& targets,
                             std::vector<double>* dlogits) {
  ST_CHECK(logits.size() == targets.size() && !logits.empty(), "reference bce: sizes");
  const double n = static_cast<double>(logits.size());
  double total = 0.0;
  if (dlogits) dlogits->assign(logits.size(), 0.0);
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const double s = 1.0 / (1.0 + std::exp(-logits[i])), y = targets[i];
    total += -(y * std::log(s) + (1.0 - y) * std::log(1.0 - s));
    if (dlogits) (*dlogits)[i] = (s - y) / n;
  }
  return total / n;
}

}  // namespace scaletrain::test
