// Private to src/ops: the windows of average and adaptive average pooling along one axis, shared
// by the CPU kernels (cpu/pool_cpu.cpp) and the CUDA kernels (cuda/pool_cuda.cu), so that both
// sum the same input positions in the same order and divide by the same number: their results
// agree bitwise. The two axes are independent, and a window's divisor is the product of theirs.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define ST_POOL_HOST_DEVICE __host__ __device__
#else
#define ST_POOL_HOST_DEVICE
#endif

namespace scaletrain::ops::pool {

// One axis (rows or columns) of an average pooling: the input and output sizes and the rule.
struct AvgAxis {
  int64_t in = 0, out = 0;
  bool adaptive = false;  // AdaptiveAvgPool2d's windows; kernel, stride and padding are then unused
  int64_t kernel = 1, stride = 1, padding = 0;
  bool count_include_pad = true;
};

// Input positions [begin, end) of one window, and its divisor along this axis.
struct Window {
  int64_t begin, end, divisor;
};

// Output positions [begin, end): the windows that hold one input position, in order.
struct Windows {
  int64_t begin, end;
};

ST_POOL_HOST_DEVICE inline int64_t min_of(int64_t a, int64_t b) { return a < b ? a : b; }
ST_POOL_HOST_DEVICE inline int64_t max_of(int64_t a, int64_t b) { return a > b ? a : b; }

// PyTorch's windows (aten AvgPoolKernel, AdaptiveAveragePooling). Adaptive: [floor(o * in / out),
// ceil((o + 1) * in / out)). Average: [o * s - p, o * s - p + k), cut at in + p, so that the part of
// a ceil-mode window beyond the right padding is not counted even with count_include_pad; the
// divisor counts the rest (the explicit padding included) with count_include_pad, else only the
// input positions.
ST_POOL_HOST_DEVICE inline Window window_of(const AvgAxis& a, int64_t o) {
  if (a.adaptive) {
    const int64_t begin = o * a.in / a.out, end = ((o + 1) * a.in + a.out - 1) / a.out;
    return {begin, end, end - begin};
  }
  const int64_t start = o * a.stride - a.padding;
  const int64_t stop = min_of(start + a.kernel, a.in + a.padding);
  const int64_t begin = max_of(start, 0), end = min_of(stop, a.in);
  return {begin, end, a.count_include_pad ? stop - start : end - begin};
}

// The windows holding input position i: exactly the o with window_of(a, o).begin <= i < end.
ST_POOL_HOST_DEVICE inline Windows windows_holding(const AvgAxis& a, int64_t i) {
  if (a.adaptive) {
    // floor(o * in / out) <= i  <=>  o <= ((i + 1) * out - 1) / in;
    // ceil((o + 1) * in / out) > i  <=>  o >= floor(i * out / in).
    return {i * a.out / a.in, min_of(((i + 1) * a.out - 1) / a.in + 1, a.out)};
  }
  // o * s - p <= i < o * s - p + k (the cut at in + p lies beyond every input position).
  const int64_t t = i + a.padding - a.kernel + 1;
  const int64_t first = t <= 0 ? 0 : (t + a.stride - 1) / a.stride;
  return {first, min_of((i + a.padding) / a.stride + 1, a.out)};
}

}  // namespace scaletrain::ops::pool
