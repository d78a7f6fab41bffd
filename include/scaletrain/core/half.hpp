// 16-bit floating-point conversions: gradient compression's wire format today, mixed precision's
// storage format next (docs/mixed-precision.md). Written out so that they are exact, branch-free
// (the compiler vectorises the loops over them) and need no library; torch.torch_half checks
// them against PyTorch's own conversions.
//   fp16 (IEEE binary16): 1 sign, 5 exponent, 10 mantissa bits; max 65504; subnormals down to 2^-24.
//   bf16: the top 16 bits of a float32 (same range, 8 mantissa bits).
// float -> 16 bit rounds to nearest, ties to even; overflow gives inf; NaN stays NaN (quiet);
// values below the smallest subnormal round to (signed) zero. 16 bit -> float is exact.
#pragma once

#include <cstdint>
#include <cstring>

namespace scaletrain {

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

// Every case is computed and the right one selected, so that loops vectorise.
inline uint16_t float_to_fp16(float value) {
  const uint32_t bits = float_bits(value);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t a = bits & 0x7fffffffu;
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped bits to nearest even.
  const uint32_t normal = (a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13;
  // Below 2^-14, a subnormal (or zero): adding 0.5 puts the value's 2^-24 units in the low
  // mantissa bits of a float with exponent -1, and the float addition rounds to nearest even.
  const uint32_t subnormal = float_bits(bits_float(a) + 0.5f) - 0x3f000000u;
  uint32_t out = a < 0x38800000u ? subnormal : normal;
  out = a >= 0x477ff000u ? 0x7c00u : out;  // inf, and every finite value that rounds to >= 65520
  out = a > 0x7f800000u ? 0x7e00u : out;   // NaN
  return static_cast<uint16_t>(out | sign);
}

inline float fp16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t a = h & 0x7fffu;
  const uint32_t normal = (a << 13) + 0x38000000u;
  // Subnormal m * 2^-24: build 2^-14 * (1 + m / 1024) and subtract 2^-14 (both exact).
  const uint32_t subnormal = float_bits(bits_float((a << 13) + 0x38800000u) - 0x1p-14f);
  const uint32_t special = (a << 13) | 0x7f800000u;  // inf, NaN (payload kept)
  const uint32_t bits = a >= 0x7c00u ? special : (a < 0x400u ? subnormal : normal);
  return bits_float(bits | sign);
}

inline uint16_t float_to_bf16(float value) {
  const uint32_t bits = float_bits(value);
  // Round to nearest even on the 16 dropped bits; overflow carries into inf as it should.
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (bits >> 16) | 0x40u;
  return static_cast<uint16_t>((bits & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

inline float bf16_to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

// The 16-bit formats mixed precision stores tensors in (--precision amp-fp16 | amp-bf16).
enum class HalfFormat { fp16, bf16 };

// A float rounded to the nearest value the format holds (ties to even), as a float: what storing
// it in 16 bits and reading it back gives.
inline float round_to(HalfFormat format, float value) {
  return format == HalfFormat::fp16 ? fp16_to_float(float_to_fp16(value)) : bf16_to_float(float_to_bf16(value));
}

// Every element of data[0, n) rounded so, in place (the CPU's stand-in for 16-bit storage).
void round_in_place(HalfFormat format, float* data, int64_t n);

}  // namespace scaletrain
