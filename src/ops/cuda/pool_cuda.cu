// CUDA max, average, adaptive average and global average pooling on channels-last data,
// computing exactly what the CPU kernels (src/ops/cpu/pool_cpu.cpp) compute, bitwise: the same
// comparisons, the same first-maximum rule, the same windows and divisors (ops/pool_windows.hpp),
// the same summation order.
// One thread per output value (forward) or per input value (backward), channel fastest, so a
// warp reads and writes contiguous channels (the max pool's threads take 4 consecutive channels
// of one pixel each where C allows, and work its window out once for them). Backward gathers rather than scatters: each
// input value sums the gradients of the windows that hold it (max: that pick it), in window order, so no two threads
// write one dx value and the result is deterministic without atomics. Own kernels rather than cuDNN pooling, which has
// no ceil mode (its output size is always floor's) and no adaptive pooling, so it cannot compute PyTorch's ceil-mode or
// adaptive windows; PyTorch itself pools with own kernels. 16-bit storage (with_half_storage, ops/op.hpp): each tensor
// is read and written in its own format (f32, f16 or bf16, ops/cuda/half_io.cuh); every kernel computes in float (or
// double, as before) and stores each value once, so a 16-bit output has the bits of the fp32 kernel's output rounded by
// the dispatch (gpu.half_storage), and the max pool's comparisons see the same widened values.
#include <cstdint>
#include <cstdlib>
#include <cuda/std/limits>
#include <string>
#include <type_traits>

#include "backend/cuda/cuda_context.hpp"
#include "ops/cuda/grid_stride.cuh"
#include "ops/cuda/half_io.cuh"
#include "ops/pool_windows.hpp"
#include "scaletrain/ops/pool.hpp"

namespace scaletrain::ops::cuda {
namespace {

using scaletrain::cuda::blocks_for;
using scaletrain::cuda::kThreadsPerBlock;

// The geometry of one max pooling, passed by value, in the index type I the kernel computes with:
// int32_t where every index fits (GPUs divide 32-bit integers in a few instructions, 64-bit ones
// in a subroutine of dozens, and these kernels take several quotients per element), else int64_t.
template <typename I>
struct PoolShape {
  I n, h, w, c;  // input (N, H, W, C)
  I oh, ow;      // output rows and columns
  I kernel, stride, padding;
};

// Input rows [y0, y1) and columns [x0, x1) of window (oy, ox); padding is simply left out, as on the CPU.
template <typename I>
struct Window {
  I y0, y1, x0, x1;
};

template <typename I>
__device__ inline Window<I> window(const PoolShape<I>& s, I oy, I ox) {
  const I ys = oy * s.stride - s.padding, xs = ox * s.stride - s.padding;
  return {ys > 0 ? ys : 0, ys + s.kernel < s.h ? ys + s.kernel : s.h, xs > 0 ? xs : 0,
          xs + s.kernel < s.w ? xs + s.kernel : s.w};
}

// The first output index (row or column) whose window covers input index `pos`: window o covers
// [o * stride - padding, o * stride - padding + kernel).
template <typename I>
__device__ inline I first_covering(I pos, const PoolShape<I>& s) {
  const I t = pos + s.padding - s.kernel + 1;
  return t <= 0 ? 0 : (t - 1) / s.stride + 1;  // ceil(t / stride), with no sum that could overflow I
}

// The last output index whose window covers `pos`, within [0, out).
template <typename I>
__device__ inline I last_covering(I pos, I out, const PoolShape<I>& s) {
  const I last = (pos + s.padding) / s.stride;
  return last < out - 1 ? last : out - 1;
}

// Thread g's pixel (b, y, x) in an (N, rows, cols) image grid and its first channel j0, for G
// consecutive channels a thread (`groups` = C / G threads a pixel).
template <typename I>
struct PixelChannels {
  I pixel, b, y, x, j0;
};
template <typename I, int G>
__device__ inline PixelChannels<I> pixel_channels(I g, I groups, I rows, I cols) {
  PixelChannels<I> p;
  p.j0 = (g % groups) * G;
  p.pixel = g / groups;
  p.x = p.pixel % cols;
  const I t = p.pixel / cols;
  p.y = t % rows;
  p.b = t / rows;
  return p;
}

// One thread per output pixel and G consecutive channels (G = 4 where C allows, else 1):
// the pixel's position and window are worked out once for its G channels, and each channel's
// maximum is taken over the window in the same row-major order as the CPU's.
template <typename I, int G>
__global__ void max_pool2d_forward_kernel(const void* x, ElemKind xk, void* y, ElemKind yk, PoolShape<I> s) {
  const I groups = s.c / G;
  const I total = s.n * s.oh * s.ow * groups;
  for (I g = static_cast<I>(grid_first()); g < total; g += static_cast<I>(grid_stride())) {
    const PixelChannels<I> o = pixel_channels<I, G>(g, groups, s.oh, s.ow);
    const I b = o.b, j0 = o.j0;
    const Window<I> win = window(s, o.y, o.x);
    float best[G];
#pragma unroll
    for (int k = 0; k < G; ++k) best[k] = -::cuda::std::numeric_limits<float>::infinity();
    for (I iy = win.y0; iy < win.y1; ++iy)
      for (I ix = win.x0; ix < win.x1; ++ix) {
        const I at = ((b * s.h + iy) * s.w + ix) * s.c + j0;
#pragma unroll
        for (int k = 0; k < G; ++k) {
          const float v = load_float(x, xk, at + k);
          best[k] = (v > best[k] || v != v) ? v : best[k];  // a NaN wins, as in PyTorch
        }
      }
#pragma unroll
    for (int k = 0; k < G; ++k) store_float(y, yk, o.pixel * s.c + j0 + k, best[k]);
  }
}

// dx at input (b, iy, ix, j) = sum, over the windows covering it in row-major window order, of
// dy of each window whose first position (row-major) equal to the forward maximum is this one.
// The CPU kernel hands each window's gradient to that same position and adds into dx in the same
// window order, so the sums agree bitwise. A NaN maximum equals nothing, so its gradient is
// dropped, on both. One thread per input pixel and G consecutive channels, as forward: the
// windows covering the pixel are found once for its G channels.
template <typename I, int G>
__global__ void max_pool2d_backward_kernel(const void* x, ElemKind xk, const void* y, ElemKind yk, const void* dy,
                                           ElemKind dyk, void* dx, ElemKind dxk, PoolShape<I> s) {
  const I groups = s.c / G;
  const I total = s.n * s.h * s.w * groups;
  for (I g = static_cast<I>(grid_first()); g < total; g += static_cast<I>(grid_stride())) {
    const PixelChannels<I> in = pixel_channels<I, G>(g, groups, s.h, s.w);
    const I pixel = in.pixel, b = in.b, iy = in.y, ix = in.x, j0 = in.j0;
    const I x_image = b * s.h * s.w * s.c;  // image b; position (ry, rx), channel j at (ry * w + rx) * c + j
    const I oy0 = first_covering(iy, s), oy1 = last_covering(iy, s.oh, s);
    const I ox0 = first_covering(ix, s), ox1 = last_covering(ix, s.ow, s);
    for (int k = 0; k < G; ++k) {
      const I j = j0 + k;
      const I i = pixel * s.c + j;
      const float v = load_float(x, xk, i);
      float sum = 0.0f;
      for (I oy = oy0; oy <= oy1; ++oy)
        for (I ox = ox0; ox <= ox1; ++ox) {
          const I o = ((b * s.oh + oy) * s.ow + ox) * s.c + j;
          const float best = load_float(y, yk, o);
          if (!(v == best)) continue;
          // This position wins the window only if no earlier position in scan order also equals the maximum.
          const Window<I> win = window(s, oy, ox);
          bool earlier = false;
          for (I ry = win.y0; ry <= iy && !earlier; ++ry) {
            const I rx_end = ry < iy ? win.x1 : ix;
            for (I rx = win.x0; rx < rx_end; ++rx)
              if (load_float(x, xk, x_image + (ry * s.w + rx) * s.c + j) == best) {
                earlier = true;
                break;
              }
          }
          if (!earlier) sum += load_float(dy, dyk, o);
        }
      store_float(dx, dxk, i, sum);
    }
  }
}

// y (b, j) = the mean of channel j over image b's H*W pixels, summed in double in pixel order and
// rounded once, as on the CPU. One thread per (b, j): neighbouring threads read neighbouring channels.
__global__ void global_avg_pool_forward_kernel(const void* x, ElemKind xk, void* y, ElemKind yk, int64_t n, int64_t hw,
                                               int64_t c) {
  const int64_t total = n * c;
  for (int64_t t = grid_first(); t < total; t += grid_stride()) {
    const int64_t b = t / c, j = t % c;
    const int64_t in = b * hw * c + j;
    double sum = 0.0;
    for (int64_t q = 0; q < hw; ++q) sum += load_float(x, xk, in + q * c);
    store_float(y, yk, t, static_cast<float>(sum / static_cast<double>(hw)));
  }
}

__global__ void global_avg_pool_backward_kernel(const void* dy, ElemKind dyk, void* dx, ElemKind dxk, int64_t n,
                                                int64_t hw, int64_t c, float inv_hw) {
  const int64_t total = n * hw * c;
  for (int64_t i = grid_first(); i < total; i += grid_stride()) {
    const int64_t b = i / (hw * c), j = i % c;
    store_float(dx, dxk, i, load_float(dy, dyk, b * c + j) * inv_hw);
  }
}

// Average and adaptive average pooling: y (b, oy, ox, j) = the window's sum, in double in
// row-major order, divided by its divisor and rounded once, as on the CPU.
__global__ void avg_forward_kernel(const void* x, ElemKind xk, void* y, ElemKind yk, int64_t n, int64_t h, int64_t w,
                                   int64_t c, pool::AvgAxis rows, pool::AvgAxis cols) {
  const int64_t total = n * rows.out * cols.out * c;
  for (int64_t o = grid_first(); o < total; o += grid_stride()) {
    const int64_t j = o % c;
    int64_t t = o / c;
    const int64_t ox = t % cols.out;
    t /= cols.out;
    const int64_t oy = t % rows.out;
    const int64_t b = t / rows.out;
    const pool::Window wy = pool::window_of(rows, oy), wx = pool::window_of(cols, ox);
    double sum = 0.0;
    for (int64_t iy = wy.begin; iy < wy.end; ++iy)
      for (int64_t ix = wx.begin; ix < wx.end; ++ix) sum += load_float(x, xk, ((b * h + iy) * w + ix) * c + j);
    store_float(y, yk, o, static_cast<float>(sum / static_cast<double>(wy.divisor * wx.divisor)));
  }
}

// dx (b, iy, ix, j) = the sum, over the windows holding the position in row-major order, of
// dy / divisor, in double, rounded once, as on the CPU.
__global__ void avg_backward_kernel(const void* dy, ElemKind dyk, void* dx, ElemKind dxk, int64_t n, int64_t h,
                                    int64_t w, int64_t c, pool::AvgAxis rows, pool::AvgAxis cols) {
  const int64_t total = n * h * w * c;
  for (int64_t i = grid_first(); i < total; i += grid_stride()) {
    const int64_t j = i % c;
    int64_t t = i / c;
    const int64_t ix = t % w;
    t /= w;
    const int64_t iy = t % h;
    const int64_t b = t / h;
    const pool::Windows oys = pool::windows_holding(rows, iy), oxs = pool::windows_holding(cols, ix);
    double sum = 0.0;
    for (int64_t oy = oys.begin; oy < oys.end; ++oy) {
      const int64_t divisor_y = pool::window_of(rows, oy).divisor;
      for (int64_t ox = oxs.begin; ox < oxs.end; ++ox) {
        const double divisor = static_cast<double>(divisor_y * pool::window_of(cols, ox).divisor);
        sum += static_cast<double>(load_float(dy, dyk, ((b * rows.out + oy) * cols.out + ox) * c + j)) / divisor;
      }
    }
    store_float(dx, dxk, i, static_cast<float>(sum));
  }
}

template <typename I>
PoolShape<I> pool_shape(const MaxPool2dParams& p, const Tensor& x, const Tensor& y) {
  return {static_cast<I>(x.dim(0)), static_cast<I>(x.dim(1)), static_cast<I>(x.dim(2)),
          static_cast<I>(x.dim(3)), static_cast<I>(y.dim(1)), static_cast<I>(y.dim(2)),
          static_cast<I>(p.kernel), static_cast<I>(p.stride), static_cast<I>(p.padding)};
}

// Whether the 32-bit kernels may run: every element index of x and y, and the grid-stride loop's
// index past the last (at most the largest grid's thread count more), fit in int32_t.
bool indices_fit_int32(const Tensor& x, const Tensor& y) {
  constexpr int64_t kLargestGrid = scaletrain::cuda::kMaxBlocks * kThreadsPerBlock;
  constexpr int64_t kLimit = int64_t{INT32_MAX} - kLargestGrid;
  return x.numel() < kLimit && y.numel() < kLimit;
}

pool::AvgAxis avg_axis(const AvgPool2dParams& p, int64_t in, int64_t out) {
  return {in, out, false, p.kernel, p.stride, p.padding, p.count_include_pad};
}

pool::AvgAxis adaptive_axis(int64_t in, int64_t out) { return {in, out, true}; }

void avg_forward(Context& ctx, const Tensor& x, Tensor& y, const pool::AvgAxis& rows, const pool::AvgAxis& cols) {
  const int64_t total = y.numel();
  if (total == 0) return;
  avg_forward_kernel<<<blocks_for(total), kThreadsPerBlock, 0, scaletrain::cuda::compute_stream(ctx)>>>(
      x.raw(), elem_kind(x, "avg_pool x"), y.raw(), elem_kind(y, "avg_pool y"), x.dim(0), x.dim(1), x.dim(2), x.dim(3),
      rows, cols);
  ST_CHECK_LAUNCH();
}

void avg_backward(Context& ctx, const Tensor& dy, Tensor& dx, const pool::AvgAxis& rows, const pool::AvgAxis& cols) {
  const int64_t total = dx.numel();
  if (total == 0) return;
  avg_backward_kernel<<<blocks_for(total), kThreadsPerBlock, 0, scaletrain::cuda::compute_stream(ctx)>>>(
      dy.raw(), elem_kind(dy, "avg_pool dy"), dx.raw(), elem_kind(dx, "avg_pool dx"), dx.dim(0), dx.dim(1), dx.dim(2),
      dx.dim(3), rows, cols);
  ST_CHECK_LAUNCH();
}

}  // namespace

namespace {

// The test hook SCALETRAIN_MAX_POOL_KERNEL=per-value runs the kernels as they were before the
// 32-bit indices and channel groups (64-bit indices, one value per thread), for side-by-side
// timings (gpu.half_storage). Read at each call, so that one process can time both ways.
bool per_value_kernels() {
  const char* hook = std::getenv("SCALETRAIN_MAX_POOL_KERNEL");
  return hook != nullptr && std::string(hook) == "per-value";
}

// Runs launch(I{}, std::integral_constant<int, G>{}) with the kernels for this pooling: 32-bit
// indices where they fit, with 4 channels per thread where C is a multiple of 4 (every CNN here
// but for odd test shapes), else one; 64-bit indices one value per thread (tensors past 2^31
// elements, and the test hook). Three instantiations per direction, not six: each is linked into
// every program, and the GPU bundle must stay under the device tool's 64 MiB.
template <typename Launch>
void with_pool_kernel(const Tensor& x, const Tensor& y, Launch&& launch) {
  if (per_value_kernels() || !indices_fit_int32(x, y))
    launch(int64_t{}, std::integral_constant<int, 1>{});
  else if (x.dim(3) % 4 == 0)
    launch(int32_t{}, std::integral_constant<int, 4>{});
  else
    launch(int32_t{}, std::integral_constant<int, 1>{});
}

}  // namespace

void max_pool2d_forward(Context& ctx, const MaxPool2dParams& p, const Tensor& x, Tensor& y) {
  if (y.numel() == 0) return;
  const cudaStream_t stream = scaletrain::cuda::compute_stream(ctx);
  const ElemKind xk = elem_kind(x, "max_pool2d_forward x"), yk = elem_kind(y, "max_pool2d_forward y");
  with_pool_kernel(x, y, [&](auto index, auto group) {
    using I = decltype(index);
    constexpr int G = decltype(group)::value;
    max_pool2d_forward_kernel<I, G>
        <<<blocks_for(y.numel() / G), kThreadsPerBlock, 0, stream>>>(x.raw(), xk, y.raw(), yk, pool_shape<I>(p, x, y));
  });
  ST_CHECK_LAUNCH();
}

void max_pool2d_backward(Context& ctx, const MaxPool2dParams& p, const Tensor& x, const Tensor& y, const Tensor& dy,
                         Tensor& dx) {
  if (dx.numel() == 0) return;
  const cudaStream_t stream = scaletrain::cuda::compute_stream(ctx);
  const ElemKind xk = elem_kind(x, "max_pool2d_backward x"), yk = elem_kind(y, "max_pool2d_backward y");
  const ElemKind dyk = elem_kind(dy, "max_pool2d_backward dy"), dxk = elem_kind(dx, "max_pool2d_backward dx");
  with_pool_kernel(x, y, [&](auto index, auto group) {
    using I = decltype(index);
    constexpr int G = decltype(group)::value;
    max_pool2d_backward_kernel<I, G><<<blocks_for(dx.numel() / G), kThreadsPerBlock, 0, stream>>>(
        x.raw(), xk, y.raw(), yk, dy.raw(), dyk, dx.raw(), dxk, pool_shape<I>(p, x, y));
  });
  ST_CHECK_LAUNCH();
}

void avg_pool2d_forward(Context& ctx, const AvgPool2dParams& p, const Tensor& x, Tensor& y) {
  avg_forward(ctx, x, y, avg_axis(p, x.dim(1), y.dim(1)), avg_axis(p, x.dim(2), y.dim(2)));
}

void avg_pool2d_backward(Context& ctx, const AvgPool2dParams& p, const Tensor& dy, Tensor& dx) {
  avg_backward(ctx, dy, dx, avg_axis(p, dx.dim(1), dy.dim(1)), avg_axis(p, dx.dim(2), dy.dim(2)));
}

void adaptive_avg_pool2d_forward(Context& ctx, const AdaptiveAvgPool2dParams& p, const Tensor& x, Tensor& y) {
  avg_forward(ctx, x, y, adaptive_axis(x.dim(1), y.dim(1)), adaptive_axis(x.dim(2), y.dim(2)));
}

void adaptive_avg_pool2d_backward(Context& ctx, const AdaptiveAvgPool2dParams& p, const Tensor& dy, Tensor& dx) {
  avg_backward(ctx, dy, dx, adaptive_axis(dx.dim(1), dy.dim(1)), adaptive_axis(dx.dim(2), dy.dim(2)));
}

void global_avg_pool_forward(Context& ctx, const Tensor& x, Tensor& y) {
  const int64_t n = x.dim(0), hw = x.dim(1) * x.dim(2), c = x.dim(3);
  if (n * c == 0) return;
  global_avg_pool_forward_kernel<<<blocks_for(n * c), kThreadsPerBlock, 0, scaletrain::cuda::compute_stream(ctx)>>>(
      x.raw(), elem_kind(x, "global_avg_pool_forward x"), y.raw(), elem_kind(y, "global_avg_pool_forward y"), n, hw, c);
  ST_CHECK_LAUNCH();
}

void global_avg_pool_backward(Context& ctx, const Tensor& dy, Tensor& dx) {
  const int64_t n = dx.dim(0), hw = dx.dim(1) * dx.dim(2), c = dx.dim(3);
  const int64_t total = n * hw * c;
  if (total == 0) return;
  const float inv_hw = 1.0f / static_cast<float>(hw);  // as on the CPU: rounded once, then one multiply per value
  global_avg_pool_backward_kernel<<<blocks_for(total), kThreadsPerBlock, 0, scaletrain::cuda::compute_stream(ctx)>>>(
      dy.raw(), elem_kind(dy, "global_avg_pool_backward dy"), dx.raw(), elem_kind(dx, "global_avg_pool_backward dx"), n,
      hw, c, inv_hw);
  ST_CHECK_LAUNCH();
}

}  // namespace scaletrain::ops::cuda
