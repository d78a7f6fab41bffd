// 16-bit floating-point conversions for gradient compression, written out so that they are
// exact, branch-free (the compiler vectorises the loops over them) and need no library.
//   fp16 (IEEE binary16): 1 sign, 5 exponent, 10 mantissa bits; max 65504; subnormals down to 2^-24.
//   bf16: the top 16 bits of a float32 (same range, 8 mantissa bits).
// float -> 16 bit rounds to nearest, ties to even; overflow gives inf; NaN stays NaN (quiet);
// values below the smallest subnormal round to (signed) zero. 16 bit -> float is exact.
#pragma once

#include <cstdint>
#include <cstring>

namespace scaletrain::comm {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline uint16_t float_to_fp16(float value) {
  const uint32_t bits = float_bits(value);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t a = bits & 0x7fffffffu;
  uint16_t out;
  if (a > 0x7f800000u) {
    out = 0x7e00u;  // NaN
  } else if (a >= 0x477ff000u) {
    out = 0x7c00u;  // inf, and every finite value that rounds to 65520 or more
  } else if (a < 0x38800000u) {
    // Below 2^-14: a subnormal (or zero). Adding 0.5 puts the value's 2^-24 units in the low
    // mantissa bits of a float with exponent -1, and the float addition rounds to nearest even.
    out = static_cast<uint16_t>(float_bits(bits_float(a) + 0.5f) - 0x3f000000u);
  } else {
    // Normal: rebias the exponent (127 -> 15) and round the 13 dropped bits to nearest even.
    const uint32_t odd = (a >> 13) & 1u;
    out = static_cast<uint16_t>((a - 0x38000000u + 0xfffu + odd) >> 13);
  }
  return static_cast<uint16_t>(out | sign);
}

inline float fp16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t a = h & 0x7fffu;
  uint32_t bits;
  if (a >= 0x7c00u) {
    bits = 0x7f800000u | ((a & 0x3ffu) << 13);  // inf, NaN (payload kept)
  } else if (a < 0x400u) {
    bits = float_bits(static_cast<float>(a) * 0x1p-24f);  // subnormal or zero: exact
  } else {
    bits = (a << 13) + 0x38000000u;
  }
  return bits_float(bits | sign);
}

inline uint16_t float_to_bf16(float value) {
  const uint32_t bits = float_bits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);  // quiet NaN
  // Round to nearest even on the 16 dropped bits; overflow carries into inf as it should.
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

inline float bf16_to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

}  // namespace scaletrain::comm
