// RawDecoder: raw uint8 pixels -> the batch's uint8 pixels, with the CIFAR-style training
// augmentation (random crop with zero padding, horizontal flip) applied on the way. Without
// augmentation a sample is one memcpy; with it, each output row is one copy (or one reversed
// copy) of a source row span plus the zero padding. Normalisation is the model's first op.
#include <algorithm>
#include <cstdint>
#include <cstring>
#if defined(__AVX512VBMI__) || defined(__SSE__)
#include <immintrin.h>
#endif

#include "scaletrain/core/error.hpp"
#include "scaletrain/data/pipeline.hpp"

namespace scaletrain::data {
namespace {

// dst[x] = src[n - 1 - x] for pixels of c bytes (src and dst do not overlap).
void reverse_pixels(const uint8_t* src, int64_t n, int c, uint8_t* dst) {
  if (c == 3) {
    int64_t x = 0;
#ifdef __AVX512VBMI__
    // 21 RGB pixels (63 of a register's 64 bytes) per step, reversed by one byte permutation.
    // Full-width loads and stores: a store's 64th byte lands on pixel x + 21, which the next step
    // (or the scalar tail) overwrites, and x starts at 1 so that no load reads past the row.
    if (n > 22) {
      alignas(64) uint8_t index[64];
      for (int i = 0; i < 21; ++i)
        for (int k = 0; k < 3; ++k) index[3 * i + k] = static_cast<uint8_t>(3 * (20 - i) + k);
      index[63] = 63;
      const __m512i perm = _mm512_load_si512(index);
      std::memcpy(dst, src + (n - 1) * 3, 3);
      for (x = 1; x + 21 < n; x += 21) {
        const __m512i v = _mm512_loadu_si512(src + (n - x - 21) * 3);
        // (maskz form: GCC 12 warns about the plain form's undefined pass-through operand)
        _mm512_storeu_si512(dst + 3 * x, _mm512_maskz_permutexvar_epi8(~__mmask64(0), perm, v));
      }
    }
#endif
    for (; x < n; ++x) {
      const uint8_t* s = src + (n - 1 - x) * 3;
      dst[3 * x] = s[0];
      dst[3 * x + 1] = s[1];
      dst[3 * x + 2] = s[2];
    }
  } else if (c == 1) {
    for (int64_t x = 0; x < n; ++x) dst[x] = src[n - 1 - x];
  } else {
    for (int64_t x = 0; x < n; ++x) std::memcpy(dst + x * c, src + (n - 1 - x) * c, static_cast<std::size_t>(c));
  }
}

class RawDecoder : public SampleDecoder {
 public:
  RawDecoder(const SplitInfo& split, const LoaderOptions& options)
      : augment_(options.augment), pad_(options.crop_padding) {
    ST_CHECK(split.height > 0 && split.width > 0 && split.channels > 0,
             split.dir << ": raw images need a height, width and channels (got " << split.height << "x" << split.width
                       << "x" << split.channels << ")");
    ST_CHECK(
        static_cast<int>(split.mean.size()) == split.channels && static_cast<int>(split.std.size()) == split.channels,
        split.dir << ": mean and std need one value per channel");
    ST_CHECK(pad_ >= 0, "crop padding must not be negative, got " << pad_);
    ST_CHECK(!augment_ || pad_ < std::max(split.height, split.width), "crop padding "
                                                                          << pad_ << " is not smaller than the images ("
                                                                          << split.height << "x" << split.width << ")");
    height_ = split.height;
    width_ = split.width;
    channels_ = split.channels;
  }

  void decode(const uint8_t* src, std::size_t size, bool train, Rng& rng, uint8_t* dst) const override {
    const int h = height_, w = width_, c = channels_;
    const int64_t values = int64_t(h) * w * c;
    ST_CHECK(static_cast<int64_t>(size) == values,
             "raw sample has " << size << " bytes, expected " << values << " (" << h << "x" << w << "x" << c << ")");
    if (!(train && augment_)) {
      std::memcpy(dst, src, static_cast<std::size_t>(values));
      return;
    }
    // RandomCrop(padding=p) then RandomHorizontalFlip: out(y, x) = raw(y + dy - p, x' + dx - p)
    // with x' = W - 1 - x when flipped, and raw value 0 outside the image.
    const int pad = pad_;
    const int dy = pad > 0 ? static_cast<int>(rng.below(2 * pad + 1)) : pad;
    const int dx = pad > 0 ? static_cast<int>(rng.below(2 * pad + 1)) : pad;
    const bool flip = rng.below(2) == 1;
    // Unflipped, output column x reads source column x + s (s = dx - pad): the valid output
    // columns are [x0, x1). Flipped, output x holds unflipped column W - 1 - x.
    const int s = dx - pad;
    const int x0 = std::max(0, -s), x1 = std::min(w, w - s);
    const int64_t row = int64_t(w) * c;
    for (int y = 0; y < h; ++y) {
      const int sy = y + dy - pad;
      uint8_t* out = dst + y * row;
#ifdef __SSE__
      // The flip reads each row backwards, which the hardware prefetchers follow poorly: ask for
      // the row after next.
      if (sy + 2 >= 0 && sy + 2 < h)
        for (int64_t o = 0; o < row; o += 64)
          _mm_prefetch(reinterpret_cast<const char*>(src) + (sy + 2) * row + o, _MM_HINT_T0);
#endif
      if (sy < 0 || sy >= h || x0 >= x1) {
        std::memset(out, 0, static_cast<std::size_t>(row));
        continue;
      }
      const uint8_t* in = src + sy * row;
      // Unflipped: zeros [0, x0), copy [x0, x1), zeros [x1, w); flipped, the mirror image of that.
      const int lo = flip ? w - x1 : x0, hi = flip ? w - x0 : x1;
      std::memset(out, 0, static_cast<std::size_t>(lo) * c);
      if (flip)
        reverse_pixels(in + int64_t(x0 + s) * c, x1 - x0, c, out + int64_t(lo) * c);
      else
        std::memcpy(out + int64_t(lo) * c, in + int64_t(x0 + s) * c, static_cast<std::size_t>(x1 - x0) * c);
      std::memset(out + int64_t(hi) * c, 0, static_cast<std::size_t>(w - hi) * c);
    }
  }

 private:
  bool augment_;
  int pad_;
};

}  // namespace

std::unique_ptr<SampleDecoder> make_raw_decoder(const SplitInfo& split, const LoaderOptions& options) {
  return std::make_unique<RawDecoder>(split, options);
}

}  // namespace scaletrain::data
