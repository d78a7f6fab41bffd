// Private to src/ops: the dropout stream's block of four elements, shared by the CPU and CUDA
// kernels (ops/dropout.hpp says what it computes) so that both apply the same mask by
// construction. Compiled by the C++ compiler and by nvcc (host and device).
#pragma once

#include <cstdint>

#include "scaletrain/core/philox.hpp"
#include "scaletrain/ops/dropout.hpp"

namespace scaletrain::ops {

// What a kernel needs of DropoutParams, checked and converted on the host.
struct DropoutMask {
  uint64_t position;
  uint32_t key0, key1;
  uint32_t threshold;  // keep a word below it
  float scale;
};

// On the host, from checked params (p in (0, 1): p = 0 is a copy, which the kernels do without
// the stream, because a word of 2^32 - 1 would fail the compare).
inline DropoutMask dropout_mask(const DropoutParams& p) {
  return DropoutMask{p.position, p.key[0], p.key[1], dropout_threshold(p.p), dropout_scale(p.p)};
}

// out[j] = keep ? in[j] * scale : 0 for the elements 4 * block + j, j < count (count <= 4: the
// tensor's last block may be short). in and out may be the same array.
ST_PHILOX_HOST_DEVICE inline void dropout_block(const DropoutMask& m, uint64_t block, const float* in, float* out,
                                                int count) {
  const philox::Block r = philox::philox4x32_10_u64(block, m.position, m.key0, m.key1);
  for (int j = 0; j < count; ++j) out[j] = r.w[j] < m.threshold ? in[j] * m.scale : 0.0f;
}

}  // namespace scaletrain::ops
