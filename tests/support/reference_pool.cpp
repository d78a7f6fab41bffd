// Naive float64 pooling: one scalar loop per output element.
#include "support/reference_pool.hpp"

#include <algorithm>
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

// Window (oy, ox) of an average pooling, as aten's AvgPoolKernel: rows [y0, y1) and columns
// [x0, x1) of the input, and the divisor.
struct AvgWindow {
  int64_t y0, y1, x0, x1;
  double divisor;
};

AvgWindow avg_window(const PoolGeometry& g, int64_t oy, int64_t ox) {
  int64_t hstart = oy * g.stride - g.padding, wstart = ox * g.stride - g.padding;
  int64_t hend = std::min(hstart + g.kernel, g.h + g.padding), wend = std::min(wstart + g.kernel, g.w + g.padding);
  const int64_t pool_size = (hend - hstart) * (wend - wstart);
  hstart = std::max<int64_t>(hstart, 0);
  wstart = std::max<int64_t>(wstart, 0);
  hend = std::min(hend, g.h);
  wend = std::min(wend, g.w);
  const int64_t divisor = g.count_include_pad ? pool_size : (hend - hstart) * (wend - wstart);
  return {hstart, hend, wstart, wend, static_cast<double>(divisor)};
}

// Window (oy, ox) of an adaptive average pooling (aten's start_index and end_index).
AvgWindow adaptive_window(const AdaptiveGeometry& g, int64_t oy, int64_t ox) {
  const int64_t y0 = oy * g.h / g.oh, y1 = ((oy + 1) * g.h + g.oh - 1) / g.oh;
  const int64_t x0 = ox * g.w / g.ow, x1 = ((ox + 1) * g.w + g.ow - 1) / g.ow;
  return {y0, y1, x0, x1, static_cast<double>((y1 - y0) * (x1 - x0))};
}

// Forward: y = window sum / divisor; backward: dx += dy / divisor over each window.
template <typename WindowFn>
std::vector<double> windowed_mean(int64_t n, int64_t h, int64_t w, int64_t c, int64_t oh, int64_t ow,
                                  const std::vector<double>& x, WindowFn window) {
  ST_CHECK(static_cast<int64_t>(x.size()) == n * h * w * c, "reference average pool: x has the wrong size");
  std::vector<double> y(n * oh * ow * c, 0.0);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox) {
        const AvgWindow win = window(oy, ox);
        ST_CHECK(win.y1 > win.y0 && win.x1 > win.x0, "reference average pool: empty window");
        for (int64_t ch = 0; ch < c; ++ch) {
          double sum = 0.0;
          for (int64_t iy = win.y0; iy < win.y1; ++iy)
            for (int64_t ix = win.x0; ix < win.x1; ++ix) sum += x[((b * h + iy) * w + ix) * c + ch];
          y[((b * oh + oy) * ow + ox) * c + ch] = sum / win.divisor;
        }
      }
  return y;
}

template <typename WindowFn>
std::vector<double> windowed_mean_backward(int64_t n, int64_t h, int64_t w, int64_t c, int64_t oh, int64_t ow,
                                           const std::vector<double>& dy, WindowFn window) {
  ST_CHECK(static_cast<int64_t>(dy.size()) == n * oh * ow * c, "reference average pool: dy has the wrong size");
  std::vector<double> dx(n * h * w * c, 0.0);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox) {
        const AvgWindow win = window(oy, ox);
        for (int64_t ch = 0; ch < c; ++ch) {
          const double g = dy[((b * oh + oy) * ow + ox) * c + ch] / win.divisor;
          for (int64_t iy = win.y0; iy < win.y1; ++iy)
            for (int64_t ix = win.x0; ix < win.x1; ++ix) dx[((b * h + iy) * w + ix) * c + ch] += g;
        }
      }
  return dx;
}

}  // namespace

std::vector<double> reference_avg_pool2d_forward(const PoolGeometry& g, const std::vector<double>& x) {
  return windowed_mean(g.n, g.h, g.w, g.c, g.oh(), g.ow(), x,
                       [&](int64_t oy, int64_t ox) { return avg_window(g, oy, ox); });
}

std::vector<double> reference_avg_pool2d_backward(const PoolGeometry& g, const std::vector<double>& dy) {
  return windowed_mean_backward(g.n, g.h, g.w, g.c, g.oh(), g.ow(), dy,
                                [&](int64_t oy, int64_t ox) { return avg_window(g, oy, ox); });
}

std::vector<double> reference_adaptive_avg_pool2d_forward(const AdaptiveGeometry& g, const std::vector<double>& x) {
  return windowed_mean(g.n, g.h, g.w, g.c, g.oh, g.ow, x,
                       [&](int64_t oy, int64_t ox) { return adaptive_window(g, oy, ox); });
}

std::vector<double> reference_adaptive_avg_pool2d_backward(const AdaptiveGeometry& g, const std::vector<double>& dy) {
  return windowed_mean_backward(g.n, g.h, g.w, g.c, g.oh, g.ow, dy,
                                [&](int64_t oy, int64_t ox) { return adaptive_window(g, oy, ox); });
}

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
