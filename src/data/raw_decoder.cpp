// RawDecoder: raw uint8 pixels -> normalised float32, with the CIFAR-style training augmentation
// (random crop with zero padding, horizontal flip). One pass over the sample through a
// per-channel 256-entry lookup table: decoding costs one load per value, so the raw path runs
// at memory speed.
#include <algorithm>
#include <cstdint>
#ifdef __AVX__
#include <immintrin.h>
#endif

#include "scaletrain/core/error.hpp"
#include "scaletrain/data/pipeline.hpp"

namespace scaletrain::data {
namespace {

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
    lut_.resize(channels_ * 256);
    for (int c = 0; c < channels_; ++c)
      for (int v = 0; v < 256; ++v) lut_[c * 256 + v] = static_cast<float>((v / 255.0 - split.mean[c]) / split.std[c]);
  }

  void decode(const uint8_t* src, std::size_t size, bool train, Rng& rng, float* dst) const override {
    const int h = height_, w = width_, c = channels_;
    const int64_t values = int64_t(h) * w * c;
    ST_CHECK(static_cast<int64_t>(size) == values,
             "raw sample has " << size << " bytes, expected " << values << " (" << h << "x" << w << "x" << c << ")");
    const float* table = lut_.data();
    if (!(train && augment_)) {
      if (stream_lut(src, dst, values)) return;
      if (c == 1) {
        for (int64_t i = 0; i < values; ++i) dst[i] = table[src[i]];
      } else if (c == 3) {
        for (int64_t p = 0; p < values; p += 3) {
          dst[p] = table[src[p]];
          dst[p + 1] = table[256 + src[p + 1]];
          dst[p + 2] = table[512 + src[p + 2]];
        }
      } else {
        for (int64_t p = 0; p < int64_t(h) * w; ++p)
          for (int ch = 0; ch < c; ++ch) dst[p * c + ch] = table[ch * 256 + src[p * c + ch]];
      }
      return;
    }
    // RandomCrop(padding=p) then RandomHorizontalFlip: out(y, x) = raw(y + dy - p, x' + dx - p)
    // with x' = W - 1 - x when flipped, and raw value 0 outside the image.
    const int pad = pad_;
    const int dy = pad > 0 ? static_cast<int>(rng.below(2 * pad + 1)) : pad;
    const int dx = pad > 0 ? static_cast<int>(rng.below(2 * pad + 1)) : pad;
    const bool flip = rng.below(2) == 1;
    for (int y = 0; y < h; ++y) {
      const int sy = y + dy - pad;
      float* out = dst + int64_t(y) * w * c;
      for (int x = 0; x < w; ++x) {
        const int sx = (flip ? w - 1 - x : x) + dx - pad;
        if (sy >= 0 && sy < h && sx >= 0 && sx < w) {
          const uint8_t* in = src + (int64_t(sy) * w + sx) * c;
          for (int ch = 0; ch < c; ++ch) out[x * c + ch] = table[ch * 256 + in[ch]];
        } else {
          for (int ch = 0; ch < c; ++ch) out[x * c + ch] = table[ch * 256];
        }
      }
    }
  }

 private:
  // Large samples (an ImageNet-size image is 600 KB of floats, a batch far beyond the caches):
  // the same lookups, written with non-temporal stores, which skip reading the destination into
  // the cache first (~1.5-2x faster in a 64-image batch). Bitwise the same values.
  bool stream_lut(const uint8_t* src, float* dst, int64_t values) const {
#ifdef __AVX__
    if (values * 4 < (int64_t(256) << 10) || reinterpret_cast<uintptr_t>(dst) % 32 != 0) return false;
    const float* t = lut_.data();
    int64_t p = 0;
    if (channels_ == 3) {
      const float *t0 = t, *t1 = t + 256, *t2 = t + 512;
      for (; p + 24 <= values; p += 24) {
        const uint8_t* q = src + p;
        _mm256_stream_ps(
            dst + p, _mm256_setr_ps(t0[q[0]], t1[q[1]], t2[q[2]], t0[q[3]], t1[q[4]], t2[q[5]], t0[q[6]], t1[q[7]]));
        _mm256_stream_ps(dst + p + 8, _mm256_setr_ps(t2[q[8]], t0[q[9]], t1[q[10]], t2[q[11]], t0[q[12]], t1[q[13]],
                                                     t2[q[14]], t0[q[15]]));
        _mm256_stream_ps(dst + p + 16, _mm256_setr_ps(t1[q[16]], t2[q[17]], t0[q[18]], t1[q[19]], t2[q[20]], t0[q[21]],
                                                      t1[q[22]], t2[q[23]]));
      }
      for (; p < values; ++p) dst[p] = t[(p % 3) * 256 + src[p]];
    } else if (channels_ == 1) {
      for (; p + 8 <= values; p += 8) {
        const uint8_t* q = src + p;
        _mm256_stream_ps(dst + p,
                         _mm256_setr_ps(t[q[0]], t[q[1]], t[q[2]], t[q[3]], t[q[4]], t[q[5]], t[q[6]], t[q[7]]));
      }
      for (; p < values; ++p) dst[p] = t[src[p]];
    } else {
      return false;
    }
    _mm_sfence();  // the stores are visible before the batch is handed over
    return true;
#else
    (void)src;
    (void)dst;
    (void)values;
    return false;
#endif
  }

  bool augment_;
  int pad_;
  std::vector<float> lut_;  // [C][256] normalised value of each pixel value
};

}  // namespace

std::unique_ptr<SampleDecoder> make_raw_decoder(const SplitInfo& split, const LoaderOptions& options) {
  return std::make_unique<RawDecoder>(split, options);
}

}  // namespace scaletrain::data
