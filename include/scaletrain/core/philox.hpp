// Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC11;
// the Random123 library): a counter-based generator, four 32-bit words out of a 128-bit counter
// and a 64-bit key. Any word of the stream is computed directly from (key, counter), without the
// words before it, so a draw depends neither on the order nor on the thread or device that makes
// it: dropout masks (ops/dropout.hpp) are the same on the CPU and the GPU and after a resume.
//
// Header-only and usable from CUDA device code: nvcc sees the functions __host__ __device__, the
// C++ compiler plain inline functions. The 32x32->64 multiply is written in 64-bit integers on
// both sides (nvcc makes it mul.lo/mul.hi), so every backend computes the same bits.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define ST_PHILOX_HOST_DEVICE __host__ __device__
#else
#define ST_PHILOX_HOST_DEVICE
#endif

namespace scaletrain::philox {

// The four output words of one counter.
struct Block {
  uint32_t w[4];
};

// Random123's constants: the round multipliers and the Weyl key increments.
constexpr uint32_t kMultiplier0 = 0xD2511F53u;
constexpr uint32_t kMultiplier1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u;  // golden ratio
constexpr uint32_t kWeyl1 = 0xBB67AE85u;  // sqrt(3) - 1
constexpr int kRounds = 10;

// Philox4x32 with 10 rounds: counter (c0, c1, c2, c3), key (k0, k1). Random123's
// philox4x32(ctr, key) word for word.
ST_PHILOX_HOST_DEVICE inline Block philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                                                 uint32_t k1) {
  for (int round = 0; round < kRounds; ++round) {
    if (round > 0) {  // the key advances between rounds, not before the first
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
    const uint64_t p0 = static_cast<uint64_t>(kMultiplier0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(kMultiplier1) * c2;
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
  }
  return Block{{c0, c1, c2, c3}};
}

// A 128-bit counter made of two 64-bit halves (low words first), as the dropout stream indexes
// it: (element block, position).
ST_PHILOX_HOST_DEVICE inline Block philox4x32_10_u64(uint64_t counter_lo, uint64_t counter_hi, uint32_t k0,
                                                     uint32_t k1) {
  return philox4x32_10(static_cast<uint32_t>(counter_lo), static_cast<uint32_t>(counter_lo >> 32),
                       static_cast<uint32_t>(counter_hi), static_cast<uint32_t>(counter_hi >> 32), k0, k1);
}

}  // namespace scaletrain::philox
