// The JPEG sample decoder: libjpeg-turbo decode at the smallest DCT scale that still covers the
// crop, then one bilinear resample of the crop into the model's input size (uint8, rounded, as
// torchvision's PIL transforms), flipped on the way. Training: random resized crop + horizontal flip; evaluation:
// shorter side to size/0.875, centre crop.
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
  explicit JpegDecoder(const LoaderOptions& options) : augment_(options.augment) {
    height_ = options.image_height > 0 ? options.image_height : kDefaultImageSize;
    width_ = options.image_width > 0 ? options.image_width : kDefaultImageSize;
    channels_ = 3;
  }

  void decode(const uint8_t* bytes, std::size_t size, bool train, Rng& rng, uint8_t* out) const override {
    const JpegHeader full = jpeg_header(bytes, size);
    const bool augment = train && augment_;
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
  bool augment_;
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
  return std::make_unique<JpegDecoder>(options);
}

}  // namespace scaletrain::data
