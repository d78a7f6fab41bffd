// CUDA image normalisation. Like the CPU kernel (src/ops/cpu/normalize_cpu.cpp) it goes through a
// per-channel 256-entry table whose entries are computed in double and rounded once; each block
// builds the table in shared memory from the same expression, so the values are bitwise those of
// the CPU (the operations are IEEE division and subtraction in double, correctly rounded on both,
// with no multiply that could be fused). The per-channel means and standard deviations travel as
// a kernel argument by value: no host-to-device copy, so no wait on the stream.
// 16-bit storage (with_half_storage): y is written in its own format, each table entry rounded
// once more on the store (the fp32 value narrowed, as the dispatch would).
#include <cstdint>

#include "backend/cuda/cuda_context.hpp"
#include "ops/cuda/grid_stride.cuh"
#include "ops/cuda/half_io.cuh"
#include "scaletrain/core/error.hpp"
#include "scaletrain/ops/normalize.hpp"

namespace scaletrain::ops::cuda {

// At most kMaxNormalizeChannels channels (the per-channel statistics travel as kernel arguments).
constexpr int kMaxNormalizeChannels = 16;
namespace {

using scaletrain::cuda::blocks_for;
using scaletrain::cuda::kThreadsPerBlock;

constexpr unsigned kMaxBlocks = 1024;

struct ChannelStats {
  double mean[kMaxNormalizeChannels];
  double std[kMaxNormalizeChannels];
};

// count = N*H*W*C values; value i belongs to channel i % c (channels-last) and reads input value
// i, or with `reversed` the same pixel's channel c - 1 - ch.
__global__ void normalize_kernel(const uint8_t* x, void* y, ElemKind yk, int64_t count, int c, bool reversed,
                                 ChannelStats stats) {
  extern __shared__ float table[];  // c * 256 entries
  for (int e = threadIdx.x; e < c * 256; e += blockDim.x) {
    const int ch = e / 256, v = e % 256;
    table[e] = static_cast<float>((v / 255.0 - stats.mean[ch]) / stats.std[ch]);
  }
  __syncthreads();
  for (int64_t i = grid_first(); i < count; i += grid_stride()) {
    const int ch = static_cast<int>(i % c);
    store_float(y, yk, i, table[ch * 256 + x[reversed ? i + (c - 1 - 2 * ch) : i]]);
  }
}

}  // namespace

void normalize_images(Context& ctx, const Tensor& x, const std::vector<double>& mean, const std::vector<double>& std,
                      Tensor& y, ChannelOrder order) {
  const int c = static_cast<int>(x.dim(3));
  ST_CHECK(c <= kMaxNormalizeChannels,
           "normalize_images: the CUDA kernel takes at most " << kMaxNormalizeChannels << " channels, got " << c);
  const int64_t count = x.numel();
  if (count == 0) return;
  ChannelStats stats{};
  for (int ch = 0; ch < c; ++ch) {
    stats.mean[ch] = mean[ch];
    stats.std[ch] = std[ch];
  }
  const std::size_t shared_bytes = static_cast<std::size_t>(c) * 256 * sizeof(float);
  // Every block builds its own table, so the grid stays small enough that the tables cost next to
  // nothing (about one block per SM slot on the largest GPUs); the grid-stride loop does the rest.
  const unsigned blocks = blocks_for(count) < kMaxBlocks ? blocks_for(count) : kMaxBlocks;
  normalize_kernel<<<blocks, kThreadsPerBlock, shared_bytes, scaletrain::cuda::compute_stream(ctx)>>>(
      static_cast<const uint8_t*>(x.raw()), y.raw(), elem_kind(y, "normalize_images y"), count, c,
      order == ChannelOrder::reversed, stats);
  ST_CHECK_LAUNCH();
}

}  // namespace scaletrain::ops::cuda
