// Naive float64 flatten in NCHW order, element by element from the index formulas.
#include "support/reference_flatten.hpp"

#include "scaletrain/core/error.hpp"

namespace scaletrain::test {

std::vector<double> reference_flatten_chw_forward(int64_t n, int64_t h, int64_t w, int64_t c,
                                                  const std::vector<double>& x) {
  ST_CHECK(static_cast<int64_t>(x.size()) == n * h * w * c, "reference flatten: sizes");
  std::vector<double> y(x.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t hi = 0; hi < h; ++hi)
      for (int64_t wi = 0; wi < w; ++wi)
        for (int64_t ci = 0; ci < c; ++ci)
          y[i * c * h * w + ci * h * w + hi * w + wi] = x[((i * h + hi) * w + wi) * c + ci];
  return y;
}

std::vector<double> reference_flatten_chw_backward(int64_t n, int64_t h, int64_t w, int64_t c,
                                                   const std::vector<double>& dy) {
  ST_CHECK(static_cast<int64_t>(dy.size()) == n * h * w * c, "reference flatten: sizes");
  std::vector<double> dx(dy.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t hi = 0; hi < h; ++hi)
      for (int64_t wi = 0; wi < w; ++wi)
        for (int64_t ci = 0; ci < c; ++ci)
          dx[((i * h + hi) * w + wi) * c + ci] = dy[i * c * h * w + ci * h * w + hi * w + wi];
  return dx;
}

}  // namespace scaletrain::test
