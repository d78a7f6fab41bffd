// Naive float64 conv2d: one loop nest visits every (output, input, weight) triple; forward and
// both backward passes walk the same nest so their index arithmetic is written once.
#include "support/reference_conv2d.hpp"

namespace scaletrain::test {
namespace {

// Calls f(x_index, w_index, y_index) for every multiply of the convolution that does not fall
// into the zero padding. Output channel o belongs to group o / (O / groups), which reads the
// input channels g * C/groups ... (g + 1) * C/groups - 1.
template <typename F>
void for_each_tap(const RefConv2dDims& d, F&& f) {
  const int64_t oh = d.oh(), ow = d.ow(), cg = d.group_channels(), og = d.o / d.groups;
  for (int64_t n = 0; n < d.n; ++n)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j)
        for (int64_t o = 0; o < d.o; ++o)
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t ki = 0; ki < d.kh; ++ki)
              for (int64_t kj = 0; kj < d.kw; ++kj) {
                const int64_t c = (o / og) * cg + ci;
                const int64_t hi = i * d.stride_h - d.pad_top + ki;
                const int64_t wj = j * d.stride_w - d.pad_left + kj;
                if (hi < 0 || hi >= d.h || wj < 0 || wj >= d.w) continue;
                f(((n * d.h + hi) * d.w + wj) * d.c + c, ((o * cg + ci) * d.kh + ki) * d.kw + kj,
                  ((n * oh + i) * ow + j) * d.o + o);
              }
}

}  // namespace

std::vector<double> reference_conv2d_forward(const RefConv2dDims& d, const std::vector<double>& x,
                                             const std::vector<double>& w, const std::vector<double>& b) {
  std::vector<double> y(d.n * d.oh() * d.ow() * d.o, 0.0);
  if (!b.empty())
    for (std::size_t i = 0; i < y.size(); ++i) y[i] = b[i % d.o];
  for_each_tap(d, [&](int64_t xi, int64_t wi, int64_t yi) { y[yi] += x[xi] * w[wi]; });
  return y;
}

std::vector<double> reference_conv2d_backward_data(const RefConv2dDims& d, const std::vector<double>& dy,
                                                   const std::vector<double>& w) {
  std::vector<double> dx(d.n * d.h * d.w * d.c, 0.0);
  for_each_tap(d, [&](int64_t xi, int64_t wi, int64_t yi) { dx[xi] += dy[yi] * w[wi]; });
  return dx;
}

std::vector<double> reference_conv2d_backward_filter(const RefConv2dDims& d, const std::vector<double>& x,
                                                     const std::vector<double>& dy) {
  std::vector<double> dw(d.o * d.group_channels() * d.kh * d.kw, 0.0);
  for_each_tap(d, [&](int64_t xi, int64_t wi, int64_t yi) { dw[wi] += dy[yi] * x[xi]; });
  return dw;
}

std::vector<double> reference_conv2d_backward_bias(const RefConv2dDims& d, const std::vector<double>& dy) {
  std::vector<double> db(d.o, 0.0);
  for (std::size_t i = 0; i < dy.size(); ++i) db[i % d.o] += dy[i];
  return db;
}

}  // namespace scaletrain::test
