// Naive float64 pooling: one scalar loop per output element.
#include "support/reference_pool.hpp"

#include <limits>

#include "scaletrain/core/error.hpp"

namespace scaletrain::test {
namespace {

// Index into x of the first maximum of window (b, oy, ox) for channel ch; -1 if the window
// holds no input position (cannot happen for valid PyTorch geometries).
int64_t first_argmax(const PoolGeometry& g, const std::vector<double>& x, int64_t b, int64_t oy, int64_t ox,
                     int64_t ch) {
  int64_t best = -1;
  double best_value = -std::numeric_limits<double>::infinity();
  for (int64_t ky = 0; ky < g.kernel; ++ky)
    for (int64_t kx = 0; kx < g.kernel; ++kx) {
      const int64_t iy = oy * g.stride - g.padding + ky;
      const int64_t ix = ox * g.stride - g.padding + kx;
      if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
      const int64_t i = ((b * g.h + iy) * g.w + ix) * g.c + ch;
      if (best < 0 || x[i] > best_value) {
        best = i;
        best_value = x[i];
      }
    }
  return best;
}

}  // namespace

std::vector<double> reference_max_pool2d_forward(const PoolGeometry& g, const std::vector<double>& x) {
  ST_CHECK(static_cast<int64_t>(x.size()) == g.n * g.h * g.w * g.c, "reference max pool: x has the wrong size");
  std::vector<double> y(g.n * g.oh() * g.ow() * g.c);
  for (int64_t b = 0; b < g.n; ++b)
    for (int64_t oy = 0; oy < g.oh(); ++oy)
      for (int64_t ox = 0; ox < g.ow(); ++ox)
        for (int64_t ch = 0; ch < g.c; ++ch) {
          const int64_t i = first_argmax(g, x, b, oy, ox, ch);
          ST_CHECK(i >= 0, "reference max pool: empty window");
          y[((b * g.oh() + oy) * g.ow() + ox) * g.c + ch] = x[i];
        }
  return y;
}

std::vector<double> reference_max_pool2d_backward(const PoolGeometry& g, const std::vector<double>& x,
                                                  const std::vector<double>& dy) {
  ST_CHECK(static_cast<int64_t>(dy.size()) == g.n * g.oh() * g.ow() * g.c, "reference max pool: dy has the wrong size");
  std::vector<double> dx(x.size(), 0.0);
  for (int64_t b = 0; b < g.n; ++b)
    for (int64_t oy = 0; oy < g.oh(); ++oy)
      for (int64_t ox = 0; ox < g.ow(); ++ox)
        for (int64_t ch = 0; ch < g.c; ++ch)
          dx[first_argmax(g, x, b, oy, ox, ch)] += dy[((b * g.oh() + oy) * g.ow() + ox) * g.c + ch];
  return dx;
}

std::vector<double> reference_global_avg_pool_forward(const std::vector<double>& x, int64_t n, int64_t h, int64_t w,
                                                      int64_t c) {
  ST_CHECK(static_cast<int64_t>(x.size()) == n * h * w * c, "reference global average pool: x has the wrong size");
  std::vector<double> y(n * c, 0.0);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t p = 0; p < h * w; ++p)
      for (int64_t ch = 0; ch < c; ++ch) y[b * c + ch] += x[(b * h * w + p) * c + ch];
  for (double& v : y) v /= static_cast<double>(h * w);
  return y;
}

std::vector<double> reference_global_avg_pool_backward(const std::vector<double>& dy, int64_t n, int64_t h, int64_t w,
                                                       int64_t c) {
  ST_CHECK(static_cast<int64_t>(dy.size()) == n * c, "reference global average pool: dy has the wrong size");
  std::vector<double> dx(n * h * w * c);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t p = 0; p < h * w; ++p)
      for (int64_t ch = 0; ch < c; ++ch) dx[(b * h * w + p) * c + ch] = dy[b * c + ch] / static_cast<double>(h * w);
  return dx;
}

}  // namespace scaletrain::test
