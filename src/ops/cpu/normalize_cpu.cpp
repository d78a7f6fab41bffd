// CPU image normalisation through a per-channel 256-entry table (each entry computed in double
// and rounded once): one table load per value, so the op runs at memory speed. Pixels are split
// statically over the threads in whole pixels, so every thread starts at channel 0 (which a
// reversed channel order needs: it reads the pixel's channels backwards).
#include <cstdint>

#include "scaletrain/ops/normalize.hpp"

namespace scaletrain::ops::cpu {
namespace {

constexpr int64_t kParallelMin = 1 << 16;  // values; below this a thread team costs more than it saves

}  // namespace

void normalize_images(Context& ctx, const Tensor& x, const std::vector<double>& mean, const std::vector<double>& std,
                      Tensor& y, ChannelOrder order) {
  (void)ctx;
  const int c = static_cast<int>(x.dim(3));
  std::vector<float> table(static_cast<std::size_t>(c) * 256);
  for (int ch = 0; ch < c; ++ch)
    for (int v = 0; v < 256; ++v) table[ch * 256 + v] = static_cast<float>((v / 255.0 - mean[ch]) / std[ch]);
  const int64_t pixels = x.numel() / c;
  const uint8_t* src = x.data<uint8_t>();
  float* dst = y.data<float>();
  const float* t = table.data();
  const bool reversed = order == ChannelOrder::reversed;
  if (c == 1) {
#pragma omp parallel for schedule(static) if (pixels >= kParallelMin)
    for (int64_t p = 0; p < pixels; ++p) dst[p] = t[src[p]];
  } else if (c == 3) {
    // Output channel 0 reads input channel s0, channel 2 reads s2.
    const int s0 = reversed ? 2 : 0, s2 = reversed ? 0 : 2;
#pragma omp parallel for schedule(static) if (pixels * 3 >= kParallelMin)
    for (int64_t p = 0; p < pixels; ++p) {
      dst[3 * p] = t[src[3 * p + s0]];
      dst[3 * p + 1] = t[256 + src[3 * p + 1]];
      dst[3 * p + 2] = t[512 + src[3 * p + s2]];
    }
  } else {
#pragma omp parallel for schedule(static) if (pixels * c >= kParallelMin)
    for (int64_t p = 0; p < pixels; ++p)
      for (int ch = 0; ch < c; ++ch) dst[p * c + ch] = t[ch * 256 + src[p * c + (reversed ? c - 1 - ch : ch)]];
  }
}

}  // namespace scaletrain::ops::cpu
