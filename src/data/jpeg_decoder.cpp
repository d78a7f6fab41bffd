// The JPEG sample decoder: libjpeg-turbo decode at the smallest DCT scale that still covers the
// crop, then one bilinear resample of the crop into the model's input size (uint8, rounded, as
// torchvision's PIL transforms), flipped on the way. Training: random resized crop + horizontal flip; evaluation:
// shorter side to size/0.875, centre crop. With --preprocess caffe, Caffe's ImageNet recipe instead:
// the image squashed to 256x256 (one bilinear resample, aspect not kept, from the smallest DCT scale
// that still has 256 pixels each way), then a whole-pixel crop of the input size, random and mirrored
// half the time in training, the centre in evaluation: exactly a crop of the image Caffe's LMDB
// holds, up to the resize (OpenCV's bilinear there, from the full-size image).
#include <cmath>

#include "scaletrain/core/error.hpp"
#include "scaletrain/data/image_ops.hpp"
#include "scaletrain/data/pipeline.hpp"

namespace scaletrain::data {
namespace {

constexpr int kDefaultImageSize = 224;
constexpr double kEvalCropFraction = 0.875;

class JpegDecoder : public SampleDecoder {
 public:
  explicit JpegDecoder(const LoaderOptions& options)
      : augment_(options.augment), caffe_(options.preprocess == "caffe") {
    height_ = options.image_height > 0 ? options.image_height : kDefaultImageSize;
    width_ = options.image_width > 0 ? options.image_width : kDefaultImageSize;
    channels_ = 3;
  }

  void decode(const uint8_t* bytes, std::size_t size, bool train, Rng& rng, uint8_t* out) const override {
    const bool augment = train && augment_;
    if (caffe_) return decode_caffe(bytes, size, augment, rng, out);
    const JpegHeader full = jpeg_header(bytes, size);
    CropBox box = augment ? random_resized_crop_box(full.height, full.width, rng)
                          : center_crop_box(full.height, full.width, height_, width_, kEvalCropFraction);
    const bool flip = augment && rng.uniform() < 0.5;
    // The full-image size at which the crop still has at least the output's pixels.
    const int need_h = static_cast<int>(std::ceil(height_ * static_cast<double>(full.height) / box.h));
    const int need_w = static_cast<int>(std::ceil(width_ * static_cast<double>(full.width) / box.w));
    thread_local RgbImage image;
    decode_jpeg(bytes, size, image, need_h, need_w);
    const double sy = static_cast<double>(image.height) / full.height;
    const double sx = static_cast<double>(image.width) / full.width;
    box = {box.y * sy, box.x * sx, box.h * sy, box.w * sx};
    resample_crop(image, box, height_, width_, flip, out);
  }

 private:
  void decode_caffe(const uint8_t* bytes, std::size_t size, bool augment, Rng& rng, uint8_t* out) const {
    thread_local RgbImage image, squashed;
    decode_jpeg(bytes, size, image, kCaffeSquashSize, kCaffeSquashSize);
    squashed.height = squashed.width = kCaffeSquashSize;
    squashed.pixels.resize(static_cast<std::size_t>(kCaffeSquashSize) * kCaffeSquashSize * 3);
    const CropBox whole{0, 0, static_cast<double>(image.height), static_cast<double>(image.width)};
    resample_crop(image, whole, kCaffeSquashSize, kCaffeSquashSize, false, squashed.pixels.data());
    copy_crop(squashed, caffe_crop(kCaffeSquashSize, kCaffeSquashSize, height_, width_, augment, rng), height_, width_,
              out);
  }

  bool augment_;
  bool caffe_;  // --preprocess caffe
};

}  // namespace

std::unique_ptr<SampleDecoder> make_jpeg_decoder(const SplitInfo& split, const LoaderOptions& options) {
  ST_CHECK(split.channels == 3,
           split.dir << ": JPEG datasets decode to 3 channels (RGB) but the shards say " << split.channels);
  ST_CHECK(split.mean.size() == 3 && split.std.size() == 3,
           split.dir << ": JPEG datasets need mean and std of length 3");
  ST_CHECK(options.image_height >= 0 && options.image_width >= 0 && options.image_height <= 65536 &&
               options.image_width <= 65536,
           "--image-size " << options.image_height << "," << options.image_width << " is not a valid size");
  ST_CHECK(is_preprocess_mode(options.preprocess),
           "unknown --preprocess '" << options.preprocess << "' (known: " << preprocess_mode_list() << ")");
  ST_CHECK(options.preprocess != "caffe" ||
               (options.image_height <= kCaffeSquashSize && options.image_width <= kCaffeSquashSize),
           "--preprocess caffe crops the input from images squashed to "
               << kCaffeSquashSize << "x" << kCaffeSquashSize << ": --image-size " << options.image_height << ","
               << options.image_width << " is larger");
  return std::make_unique<JpegDecoder>(options);
}

}  // namespace scaletrain::data
