// Naive float64 feature concatenation and split, element by element.
#include "support/reference_concat.hpp"

#include "scaletrain/core/error.hpp"

namespace scaletrain::test {

std::vector<double> reference_concat_features(int64_t n, int64_t wa, int64_t wb, const std::vector<double>& a,
                                              const std::vector<double>& b) {
  ST_CHECK(static_cast<int64_t>(a.size()) == n * wa && static_cast<int64_t>(b.size()) == n * wb,
           "reference concat: sizes");
  std::vector<double> y(n * (wa + wb));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < wa; ++j) y[i * (wa + wb) + j] = a[i * wa + j];
    for (int64_t j = 0; j < wb; ++j) y[i * (wa + wb) + wa + j] = b[i * wb + j];
  }
  return y;
}

void reference_split_features(int64_t n, int64_t wa, int64_t wb, const std::vector<double>& dy, std::vector<double>& da,
                              std::vector<double>& db) {
  ST_CHECK(static_cast<int64_t>(dy.size()) == n * (wa + wb), "reference split: sizes");
  da.assign(n * wa, 0.0);
  db.assign(n * wb, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < wa; ++j) da[i * wa + j] = dy[i * (wa + wb) + j];
    for (int64_t j = 0; j < wb; ++j) db[i * wb + j] = dy[i * (wa + wb) + wa + j];
  }
}

}  // namespace scaletrain::test
