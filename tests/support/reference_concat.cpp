// Naive float64 concatenation along the last dimension and its split, element by element.
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

std::vector<double> reference_concat_channels(int64_t rows, const std::vector<int64_t>& widths,
                                              const std::vector<std::vector<double>>& parts) {
  ST_CHECK(parts.size() == widths.size(), "reference concat channels: sizes");
  int64_t total = 0;
  for (int64_t w : widths) total += w;
  std::vector<double> y(rows * total);
  int64_t offset = 0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    ST_CHECK(static_cast<int64_t>(parts[i].size()) == rows * widths[i], "reference concat channels: part " << i);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < widths[i]; ++j) y[r * total + offset + j] = parts[i][r * widths[i] + j];
    offset += widths[i];
  }
  return y;
}

std::vector<std::vector<double>> reference_split_channels(int64_t rows, const std::vector<int64_t>& widths,
                                                          const std::vector<double>& dy) {
  int64_t total = 0;
  for (int64_t w : widths) total += w;
  ST_CHECK(static_cast<int64_t>(dy.size()) == rows * total, "reference split channels: sizes");
  std::vector<std::vector<double>> parts;
  int64_t offset = 0;
  for (int64_t w : widths) {
    std::vector<double> part(rows * w);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < w; ++j) part[r * w + j] = dy[r * total + offset + j];
    parts.push_back(part);
    offset += w;
  }
  return parts;
}

}  // namespace scaletrain::test
