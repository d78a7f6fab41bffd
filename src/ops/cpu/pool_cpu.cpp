// CPU max, average, adaptive average and global average pooling on channels-last data.
// OpenMP SIMD loops over channels rather than oneDNN pooling: in channels-last layout every
// window position is a contiguous row of C values, so the loops vectorise fully, and backward
// can follow PyTorch's rule exactly (the gradient goes to the first maximum of each window in
// row-major order), which oneDNN's workspace does not promise. Forward parallelises over output
// rows; max-pool backward over images, because overlapping windows of one image write the same dx.
//
// Average and adaptive average pooling are own loops too, although oneDNN 2.6 has average pooling
// (and cuDNN too): neither library can express all of PyTorch's semantics. oneDNN's
// pooling_avg_include_padding counts the extra right padding that expresses ceil_mode as padding,
// where PyTorch never counts the part of a window beyond the right padding (ceil_mode with
// count_include_pad and an overhanging last window); cuDNN has no ceil mode at all; and neither
// has adaptive pooling. One loop for every case keeps one code path, PyTorch's exact divisors, and
// the same bits as the CUDA kernels (src/ops/cuda/pool_cuda.cu): both take their windows from
// ops/pool_windows.hpp, sum in double in the same order and round once. Backward gathers (each
// input position sums dy / divisor over the windows that hold it, in window order), so it
// parallelises over input rows with no two threads writing one dx value.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "ops/pool_windows.hpp"
#include "scaletrain/ops/pool.hpp"

namespace scaletrain::ops::cpu {
namespace {

constexpr int64_t kParallelMin = 1 << 15;  // below this many elements a thread team costs more than it saves

// Input rows [y0, y1) and columns [x0, x1) of window (oy, ox); padding is simply left out.
struct Window {
  int64_t y0, y1, x0, x1;
};

Window window(const MaxPool2dParams& p, int64_t h, int64_t w, int64_t oy, int64_t ox) {
  const int64_t ys = oy * p.stride - p.padding, xs = ox * p.stride - p.padding;
  return {std::max<int64_t>(ys, 0), std::min<int64_t>(ys + p.kernel, h), std::max<int64_t>(xs, 0),
          std::min<int64_t>(xs + p.kernel, w)};
}

}  // namespace

void max_pool2d_forward(Context& ctx, const MaxPool2dParams& p, const Tensor& x, Tensor& y) {
  const int64_t n = x.dim(0), h = x.dim(1), w = x.dim(2), c = x.dim(3);
  const int64_t oh = y.dim(1), ow = y.dim(2);
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
#pragma omp parallel for collapse(2) schedule(static) if (x.numel() >= kParallelMin)
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t oy = 0; oy < oh; ++oy) {
      for (int64_t ox = 0; ox < ow; ++ox) {
        float* out = yp + ((b * oh + oy) * ow + ox) * c;
#pragma omp simd
        for (int64_t j = 0; j < c; ++j) out[j] = -std::numeric_limits<float>::infinity();
        const Window win = window(p, h, w, oy, ox);
        for (int64_t iy = win.y0; iy < win.y1; ++iy)
          for (int64_t ix = win.x0; ix < win.x1; ++ix) {
            const float* in = xp + ((b * h + iy) * w + ix) * c;
            // A NaN wins, as in PyTorch.
#pragma omp simd
            for (int64_t j = 0; j < c; ++j) out[j] = (in[j] > out[j] || in[j] != in[j]) ? in[j] : out[j];
          }
      }
    }
  }
}

void max_pool2d_backward(Context& ctx, const MaxPool2dParams& p, const Tensor& x, const Tensor& y, const Tensor& dy,
                         Tensor& dx) {
  const int64_t n = x.dim(0), h = x.dim(1), w = x.dim(2), c = x.dim(3);
  const int64_t oh = y.dim(1), ow = y.dim(2);
  const float* xp = x.data<float>();
  const float* yp = y.data<float>();
  const float* dyp = dy.data<float>();
  float* dxp = dx.data<float>();
#pragma omp parallel if (x.numel() >= kParallelMin)
  {
    // Gradient of the current window not yet handed to an input: a channel's gradient goes to
    // the first position in scan order that equals the forward maximum, and then is spent.
    std::vector<float> pending(c);
    float* g = pending.data();
#pragma omp for schedule(static)
    for (int64_t b = 0; b < n; ++b) {
      float* dx_image = dxp + b * h * w * c;
#pragma omp simd
      for (int64_t i = 0; i < h * w * c; ++i) dx_image[i] = 0.0f;
      for (int64_t oy = 0; oy < oh; ++oy) {
        for (int64_t ox = 0; ox < ow; ++ox) {
          const int64_t o = ((b * oh + oy) * ow + ox) * c;
          const float* best = yp + o;
#pragma omp simd
          for (int64_t j = 0; j < c; ++j) g[j] = dyp[o + j];
          const Window win = window(p, h, w, oy, ox);
          for (int64_t iy = win.y0; iy < win.y1; ++iy)
            for (int64_t ix = win.x0; ix < win.x1; ++ix) {
              const int64_t i = ((b * h + iy) * w + ix) * c;
#pragma omp simd
              for (int64_t j = 0; j < c; ++j) {
                const bool hit = xp[i + j] == best[j];
                dxp[i + j] += hit ? g[j] : 0.0f;
                g[j] = hit ? 0.0f : g[j];
              }
            }
        }
      }
    }
  }
}

// ---- average and adaptive average pooling: one pair of kernels, the windows differ ----------

namespace {

using pool::AvgAxis;

AvgAxis avg_axis(const AvgPool2dParams& p, int64_t in, int64_t out) {
  return {in, out, false, p.kernel, p.stride, p.padding, p.count_include_pad};
}

AvgAxis adaptive_axis(int64_t in, int64_t out) { return {in, out, true}; }

// y (N, OH, OW, C) = each window's sum over x (N, H, W, C), in double in row-major order,
// divided by its divisor and rounded once.
void avg_forward(const Tensor& x, Tensor& y, const AvgAxis& rows, const AvgAxis& cols) {
  const int64_t n = x.dim(0), h = x.dim(1), w = x.dim(2), c = x.dim(3);
  const int64_t oh = y.dim(1), ow = y.dim(2);
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
#pragma omp parallel if (x.numel() >= kParallelMin)
  {
    std::vector<double> sum(c);
    double* s = sum.data();
#pragma omp for collapse(2) schedule(static)
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t oy = 0; oy < oh; ++oy) {
        const pool::Window wy = pool::window_of(rows, oy);
        for (int64_t ox = 0; ox < ow; ++ox) {
          const pool::Window wx = pool::window_of(cols, ox);
#pragma omp simd
          for (int64_t j = 0; j < c; ++j) s[j] = 0.0;
          for (int64_t iy = wy.begin; iy < wy.end; ++iy)
            for (int64_t ix = wx.begin; ix < wx.end; ++ix) {
              const float* in = xp + ((b * h + iy) * w + ix) * c;
#pragma omp simd
              for (int64_t j = 0; j < c; ++j) s[j] += in[j];
            }
          const double divisor = static_cast<double>(wy.divisor * wx.divisor);
          float* out = yp + ((b * oh + oy) * ow + ox) * c;
#pragma omp simd
          for (int64_t j = 0; j < c; ++j) out[j] = static_cast<float>(s[j] / divisor);
        }
      }
    }
  }
}

// dx (N, H, W, C) at each input position = the sum, over the windows holding it in row-major
// order, of dy / divisor, in double, rounded once.
void avg_backward(const Tensor& dy, Tensor& dx, const AvgAxis& rows, const AvgAxis& cols) {
  const int64_t n = dx.dim(0), h = dx.dim(1), w = dx.dim(2), c = dx.dim(3);
  const int64_t oh = dy.dim(1), ow = dy.dim(2);
  const float* dyp = dy.data<float>();
  float* dxp = dx.data<float>();
#pragma omp parallel if (dx.numel() >= kParallelMin)
  {
    std::vector<double> sum(c);
    double* s = sum.data();
#pragma omp for collapse(2) schedule(static)
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t iy = 0; iy < h; ++iy) {
        const pool::Windows oys = pool::windows_holding(rows, iy);
        for (int64_t ix = 0; ix < w; ++ix) {
          const pool::Windows oxs = pool::windows_holding(cols, ix);
#pragma omp simd
          for (int64_t j = 0; j < c; ++j) s[j] = 0.0;
          for (int64_t oy = oys.begin; oy < oys.end; ++oy) {
            const int64_t divisor_y = pool::window_of(rows, oy).divisor;
            for (int64_t ox = oxs.begin; ox < oxs.end; ++ox) {
              const double divisor = static_cast<double>(divisor_y * pool::window_of(cols, ox).divisor);
              const float* g = dyp + ((b * oh + oy) * ow + ox) * c;
#pragma omp simd
              for (int64_t j = 0; j < c; ++j) s[j] += static_cast<double>(g[j]) / divisor;
            }
          }
          float* out = dxp + ((b * h + iy) * w + ix) * c;
#pragma omp simd
          for (int64_t j = 0; j < c; ++j) out[j] = static_cast<float>(s[j]);
        }
      }
    }
  }
}

}  // namespace

void avg_pool2d_forward(Context& ctx, const AvgPool2dParams& p, const Tensor& x, Tensor& y) {
  avg_forward(x, y, avg_axis(p, x.dim(1), y.dim(1)), avg_axis(p, x.dim(2), y.dim(2)));
}

void avg_pool2d_backward(Context& ctx, const AvgPool2dParams& p, const Tensor& dy, Tensor& dx) {
  avg_backward(dy, dx, avg_axis(p, dx.dim(1), dy.dim(1)), avg_axis(p, dx.dim(2), dy.dim(2)));
}

void adaptive_avg_pool2d_forward(Context& ctx, const AdaptiveAvgPool2dParams& p, const Tensor& x, Tensor& y) {
  avg_forward(x, y, adaptive_axis(x.dim(1), y.dim(1)), adaptive_axis(x.dim(2), y.dim(2)));
}

void adaptive_avg_pool2d_backward(Context& ctx, const AdaptiveAvgPool2dParams& p, const Tensor& dy, Tensor& dx) {
  avg_backward(dy, dx, adaptive_axis(dx.dim(1), dy.dim(1)), adaptive_axis(dx.dim(2), dy.dim(2)));
}

void global_avg_pool_forward(Context& ctx, const Tensor& x, Tensor& y) {
  const int64_t n = x.dim(0), hw = x.dim(1) * x.dim(2), c = x.dim(3);
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
#pragma omp parallel if (x.numel() >= kParallelMin)
  {
    std::vector<double> sum(c);  // double: HW terms per channel, whatever the image size
    double* s = sum.data();
#pragma omp for schedule(static)
    for (int64_t b = 0; b < n; ++b) {
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) s[j] = 0.0;
      for (int64_t q = 0; q < hw; ++q) {
        const float* in = xp + (b * hw + q) * c;
#pragma omp simd
        for (int64_t j = 0; j < c; ++j) s[j] += in[j];
      }
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) yp[b * c + j] = static_cast<float>(s[j] / hw);
    }
  }
}

void global_avg_pool_backward(Context& ctx, const Tensor& dy, Tensor& dx) {
  const int64_t n = dx.dim(0), hw = dx.dim(1) * dx.dim(2), c = dx.dim(3);
  const float* dyp = dy.data<float>();
  float* dxp = dx.data<float>();
  const float inv_hw = 1.0f / static_cast<float>(hw);
#pragma omp parallel for collapse(2) schedule(static) if (dx.numel() >= kParallelMin)
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t q = 0; q < hw; ++q) {
      float* out = dxp + (b * hw + q) * c;
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) out[j] = dyp[b * c + j] * inv_hw;
    }
  }
}

}  // namespace scaletrain::ops::cpu
