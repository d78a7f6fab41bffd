// JPEG decode/encode through TurboJPEG (one handle per thread: decode() runs on every worker)
// and the bilinear resample-crop used by the ImageNet transforms.
#include "scaletrain/data/image_ops.hpp"

#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "scaletrain/core/error.hpp"

namespace scaletrain::data {
namespace {

// A TurboJPEG handle owned by the calling thread, created on first use. After a failed call the
// handle is replaced: libjpeg-turbo 2.1 can leave it unusable (after "Empty JPEG image (DNL not
// supported)" every later decode on it fails with "Bogus marker length", valid files included;
// found by fuzz_jpeg), and one bad sample must not fail every later one on the thread.
class ThreadHandle {
 public:
  explicit ThreadHandle(bool compress) : compress_(compress) { create(); }
  ~ThreadHandle() { tjDestroy(handle_); }
  ThreadHandle(const ThreadHandle&) = delete;
  ThreadHandle& operator=(const ThreadHandle&) = delete;
  tjhandle get() const { return handle_; }
  // The library's message for the failed call, after which the handle is replaced by a new one.
  std::string error_and_renew() {
    std::string message = tjGetErrorStr2(handle_);
    tjDestroy(handle_);
    create();
    return message;
  }

 private:
  void create() {
    handle_ = compress_ ? tjInitCompress() : tjInitDecompress();
    ST_CHECK(handle_ != nullptr, "libjpeg-turbo: cannot create a handle: " << tjGetErrorStr2(nullptr));
  }
  bool compress_;
  tjhandle handle_ = nullptr;
};

ThreadHandle& decompressor() {
  thread_local ThreadHandle h(false);
  return h;
}

ThreadHandle& compressor() {
  thread_local ThreadHandle h(true);
  return h;
}

struct Header {
  int width = 0, height = 0, subsamp = 0, colorspace = 0;
};

Header read_header(ThreadHandle& h, const uint8_t* data, std::size_t size) {
  ST_CHECK(size > 0, "JPEG data is empty");
  Header hd;
  if (tjDecompressHeader3(h.get(), data, static_cast<unsigned long>(size), &hd.width, &hd.height, &hd.subsamp,
                          &hd.colorspace) != 0)
    ST_THROW("JPEG does not decode: " << h.error_and_renew());
  ST_CHECK(hd.width > 0 && hd.height > 0, "JPEG has an empty size " << hd.width << "x" << hd.height);
  return hd;
}

// Bilinear source coordinates of every output position along one axis.
struct Axis {
  std::vector<int> i0, i1;
  std::vector<float> f;
  Axis(double start, double length, int out, int limit, bool flip) : i0(out), i1(out), f(out) {
    const double step = length / out;
    for (int o = 0; o < out; ++o) {
      const int k = flip ? out - 1 - o : o;
      double s = start + (k + 0.5) * step - 0.5;
      s = std::clamp(s, 0.0, static_cast<double>(limit - 1));
      const int a = static_cast<int>(s);
      i0[o] = a;
      i1[o] = std::min(a + 1, limit - 1);
      f[o] = static_cast<float>(s - a);
    }
  }
};

// Separable: each output row first blends its two source rows over the columns the crop uses
// (in floats), then blends along x; `store(row, values)` receives one output row of out_w * 3.
template <typename Store>
void resample(const RgbImage& src, const CropBox& box, int out_h, int out_w, bool flip, Store store) {
  ST_CHECK(src.height > 0 && src.width > 0 && out_h > 0 && out_w > 0,
           "resample: empty image " << src.height << "x" << src.width << " or output " << out_h << "x" << out_w);
  const Axis ys(box.y, box.h, out_h, src.height, false);
  const Axis xs(box.x, box.w, out_w, src.width, flip);
  const int lo = *std::min_element(xs.i0.begin(), xs.i0.end());
  const int hi = *std::max_element(xs.i1.begin(), xs.i1.end());
  const int span = (hi - lo + 1) * 3;
  std::vector<int> a(out_w), b(out_w);
  for (int ox = 0; ox < out_w; ++ox) {
    a[ox] = (xs.i0[ox] - lo) * 3;
    b[ox] = (xs.i1[ox] - lo) * 3;
  }
  thread_local std::vector<float> blended, row;
  blended.resize(span);
  row.resize(static_cast<std::size_t>(out_w) * 3);
  const std::size_t stride = static_cast<std::size_t>(src.width) * 3;
  for (int oy = 0; oy < out_h; ++oy) {
    const uint8_t* r0 = src.pixels.data() + ys.i0[oy] * stride + lo * 3;
    const uint8_t* r1 = src.pixels.data() + ys.i1[oy] * stride + lo * 3;
    const float fy = ys.f[oy];
    float* t = blended.data();
    for (int i = 0; i < span; ++i) t[i] = r0[i] + fy * (static_cast<float>(r1[i]) - r0[i]);
    float* o = row.data();
    for (int ox = 0; ox < out_w; ++ox) {
      const float fx = xs.f[ox];
      const float* p = t + a[ox];
      const float* q = t + b[ox];
      o[3 * ox] = p[0] + fx * (q[0] - p[0]);
      o[3 * ox + 1] = p[1] + fx * (q[1] - p[1]);
      o[3 * ox + 2] = p[2] + fx * (q[2] - p[2]);
    }
    store(oy, o);
  }
}

}  // namespace

JpegHeader jpeg_header(const uint8_t* data, std::size_t size) {
  const Header h = read_header(decompressor(), data, size);
  return {h.height, h.width};
}

double decode_jpeg(const uint8_t* data, std::size_t size, RgbImage& out, int min_height, int min_width) {
  ThreadHandle& h = decompressor();
  const Header hd = read_header(h, data, size);
  int width = hd.width, height = hd.height;
  if (min_height > 0 || min_width > 0) {
    // The smallest DCT scale (num/denom <= 1) whose output still covers the request.
    int count = 0;
    const tjscalingfactor* factors = tjGetScalingFactors(&count);
    for (int i = 0; i < count; ++i) {
      const tjscalingfactor sf = factors[i];
      if (sf.num > sf.denom) continue;
      const int w = TJSCALED(hd.width, sf), hh = TJSCALED(hd.height, sf);
      if (w >= min_width && hh >= min_height && static_cast<int64_t>(w) * hh < static_cast<int64_t>(width) * height) {
        width = w;
        height = hh;
      }
    }
  }
  const bool cmyk = hd.colorspace == TJCS_CMYK || hd.colorspace == TJCS_YCCK;
  const int channels = cmyk ? 4 : 3;
  std::vector<uint8_t>& buf = out.pixels;
  buf.resize(static_cast<std::size_t>(width) * height * channels);
  const int rc = tjDecompress2(h.get(), data, static_cast<unsigned long>(size), buf.data(), width, 0, height,
                               cmyk ? TJPF_CMYK : TJPF_RGB, 0);
  if (rc != 0) {
    // Warnings (e.g. extraneous bytes, common in ImageNet) still give a complete image; a
    // truncated file does not.
    const std::string msg = tjGetErrorStr2(h.get());
    if (tjGetErrorCode(h.get()) != TJERR_WARNING || msg.find("Premature end") != std::string::npos)
      ST_THROW("JPEG does not decode: " << h.error_and_renew());
  }
  if (cmyk) {
    // libjpeg returns Adobe's inverted CMYK: R = C * K / 255 and so on.
    const std::size_t n = static_cast<std::size_t>(width) * height;
    for (std::size_t i = 0; i < n; ++i) {
      const unsigned k = buf[4 * i + 3];
      for (int c = 0; c < 3; ++c) buf[3 * i + c] = static_cast<uint8_t>((buf[4 * i + c] * k + 127) / 255);
    }
    buf.resize(n * 3);
  }
  out.width = width;
  out.height = height;
  return static_cast<double>(width) / hd.width;
}

std::vector<uint8_t> encode_jpeg(const uint8_t* rgb, int height, int width, int quality) {
  ST_CHECK(height > 0 && width > 0 && quality >= 1 && quality <= 100,
           "encode_jpeg: bad size " << height << "x" << width << " or quality " << quality);
  ThreadHandle& h = compressor();
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  const int rc = tjCompress2(h.get(), rgb, width, 0, height, TJPF_RGB, &jpeg, &size, TJSAMP_420, quality, 0);
  if (rc != 0) {
    tjFree(jpeg);
    ST_THROW("JPEG encoding failed: " << h.error_and_renew());
  }
  std::vector<uint8_t> result(jpeg, jpeg + size);
  tjFree(jpeg);
  return result;
}

CropBox random_resized_crop_box(int height, int width, Rng& rng) {
  const double area = static_cast<double>(height) * width;
  const double log_lo = std::log(3.0 / 4.0), log_hi = std::log(4.0 / 3.0);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * rng.uniform(0.08, 1.0);
    const double ratio = std::exp(rng.uniform(log_lo, log_hi));
    const int w = static_cast<int>(std::lround(std::sqrt(target * ratio)));
    const int h = static_cast<int>(std::lround(std::sqrt(target / ratio)));
    if (w > 0 && h > 0 && w <= width && h <= height) {
      const int y = static_cast<int>(rng.below(static_cast<uint64_t>(height - h) + 1));
      const int x = static_cast<int>(rng.below(static_cast<uint64_t>(width - w) + 1));
      return {double(y), double(x), double(h), double(w)};
    }
  }
  // Fallback: the whole image, clamped to the aspect-ratio range, centred.
  const double in_ratio = static_cast<double>(width) / height;
  int w = width, h = height;
  if (in_ratio < 3.0 / 4.0)
    h = std::min(height, static_cast<int>(std::lround(width / (3.0 / 4.0))));
  else if (in_ratio > 4.0 / 3.0)
    w = std::min(width, static_cast<int>(std::lround(height * (4.0 / 3.0))));
  return {double((height - h) / 2), double((width - w) / 2), double(h), double(w)};
}

CropBox center_crop_box(int height, int width, int out_h, int out_w, double crop_fraction) {
  // As torchvision's Resize(int(size / fraction)) + CenterCrop(size): the side that limits the
  // cover gets the whole-pixel target, the other int(target * other / side); the crop's offset
  // rounds half to even (Python's round). Mapped back to the original image's coordinates.
  const double target_h = out_h / crop_fraction + 1e-9, target_w = out_w / crop_fraction + 1e-9;
  int rh, rw;
  if (target_h / height >= target_w / width) {
    rh = static_cast<int>(target_h);
    rw = std::max(out_w, static_cast<int>(static_cast<double>(rh) * width / height));
  } else {
    rw = static_cast<int>(target_w);
    rh = std::max(out_h, static_cast<int>(static_cast<double>(rw) * height / width));
  }
  rh = std::max(rh, out_h);
  const double top = std::nearbyint((rh - out_h) / 2.0), left = std::nearbyint((rw - out_w) / 2.0);
  const double sy = static_cast<double>(height) / rh, sx = static_cast<double>(width) / rw;
  return {top * sy, left * sx, out_h * sy, out_w * sx};
}

PixelCrop caffe_crop(int height, int width, int out_h, int out_w, bool random, Rng& rng) {
  ST_CHECK(out_h > 0 && out_w > 0 && out_h <= height && out_w <= width,
           "caffe_crop: a " << out_h << "x" << out_w << " crop does not fit a " << height << "x" << width << " image");
  if (!random) return {(height - out_h) / 2, (width - out_w) / 2, false};
  PixelCrop c;
  c.y = static_cast<int>(rng.below(static_cast<uint64_t>(height - out_h) + 1));
  c.x = static_cast<int>(rng.below(static_cast<uint64_t>(width - out_w) + 1));
  c.mirror = rng.below(2) == 1;
  return c;
}

void copy_crop(const RgbImage& src, const PixelCrop& crop, int out_h, int out_w, uint8_t* out) {
  ST_CHECK(crop.y >= 0 && crop.x >= 0 && crop.y + out_h <= src.height && crop.x + out_w <= src.width,
           "copy_crop: the " << out_h << "x" << out_w << " window at (" << crop.y << ", " << crop.x
                             << ") is outside the " << src.height << "x" << src.width << " image");
  const std::size_t row = static_cast<std::size_t>(out_w) * 3;
  for (int oy = 0; oy < out_h; ++oy) {
    const uint8_t* in = src.pixels.data() + ((static_cast<std::size_t>(crop.y) + oy) * src.width + crop.x) * 3;
    uint8_t* o = out + oy * row;
    if (!crop.mirror) {
      std::memcpy(o, in, row);
      continue;
    }
    for (int ox = 0; ox < out_w; ++ox) std::memcpy(o + 3 * ox, in + 3 * (out_w - 1 - ox), 3);
  }
}

void resample_crop(const RgbImage& src, const CropBox& box, int out_h, int out_w, bool flip, uint8_t* out) {
  const std::size_t n = static_cast<std::size_t>(out_w) * 3;
  resample(src, box, out_h, out_w, flip, [out, n](int oy, const float* v) {
    uint8_t* o = out + oy * n;
    for (std::size_t i = 0; i < n; ++i) o[i] = static_cast<uint8_t>(std::clamp(v[i] + 0.5f, 0.0f, 255.0f));
  });
}

}  // namespace scaletrain::data
