// The 16-bit conversions of core/half.hpp on raw files, for test_torch_half.py: float32 values
// in, their fp16 and bf16 bits out; and every one of the 65,536 16-bit patterns back to float32.
//   scaletrain_torch_half_helper IN.f32 OUT_FP16.u16 OUT_BF16.u16 OUT_FROM_FP16.f32 OUT_FROM_BF16.f32
// Files are raw little-endian arrays (numpy's tofile/fromfile).
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>

#include "scaletrain/core/half.hpp"

namespace {

template <typename T>
std::vector<T> read_all(const char* path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<T> values(bytes.size() / sizeof(T));
  std::copy(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(values.size() * sizeof(T)),
            reinterpret_cast<char*>(values.data()));
  return values;
}

template <typename T>
bool write_all(const char* path, const std::vector<T>& values) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(T)));
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s IN.f32 OUT_FP16.u16 OUT_BF16.u16 OUT_FROM_FP16.f32 OUT_FROM_BF16.f32\n", argv[0]);
    return 2;
  }
  const std::vector<float> in = read_all<float>(argv[1]);
  std::vector<uint16_t> fp16(in.size()), bf16(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    fp16[i] = scaletrain::float_to_fp16(in[i]);
    bf16[i] = scaletrain::float_to_bf16(in[i]);
  }
  std::vector<float> from_fp16(65536), from_bf16(65536);
  for (uint32_t h = 0; h < 65536; ++h) {
    from_fp16[h] = scaletrain::fp16_to_float(static_cast<uint16_t>(h));
    from_bf16[h] = scaletrain::bf16_to_float(static_cast<uint16_t>(h));
  }
  const bool ok = write_all(argv[2], fp16) && write_all(argv[3], bf16) && write_all(argv[4], from_fp16) &&
                  write_all(argv[5], from_bf16);
  if (!ok) std::fprintf(stderr, "%s: could not write the outputs\n", argv[0]);
  return ok ? 0 : 1;
}
