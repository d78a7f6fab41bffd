// JPEG decoding and encoding (libjpeg-turbo's TurboJPEG API) and the geometry of the ImageNet
// transforms: crop boxes (random resized crop, evaluation centre crop) and one bilinear
// resample-crop-flip pass that writes uint8 pixels. Used by the JPEG
// sample decoder, the ImageNet converter and their tests. Every function is thread-safe (one
// TurboJPEG handle per thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "scaletrain/core/rng.hpp"

namespace scaletrain::data {

// An 8-bit RGB image, (height, width, 3) channels-last.
struct RgbImage {
  int height = 0, width = 0;
  std::vector<uint8_t> pixels;
};

struct JpegHeader {
  int height = 0, width = 0;
};

// Reads the size from a JPEG's header; throws scaletrain::Error with libjpeg-turbo's message.
JpegHeader jpeg_header(const uint8_t* data, std::size_t size);

// Decodes to RGB (grayscale and CMYK/YCCK JPEGs are converted). With min_height/min_width > 0
// it uses libjpeg-turbo's DCT scaling: the smallest scale factor whose result is still at least
// min_height x min_width (never upscaling; full size when none is smaller). `out` is reused.
// Returns the scale actually used as (decoded width / full width). Throws scaletrain::Error with
// libjpeg-turbo's message for data that does not decode (including a truncated file).
double decode_jpeg(const uint8_t* data, std::size_t size, RgbImage& out, int min_height = 0, int min_width = 0);

// Encodes RGB pixels (height, width, 3) at `quality` (1..100, 4:2:0 subsampling).
std::vector<uint8_t> encode_jpeg(const uint8_t* rgb, int height, int width, int quality);

// A region of an image in pixel coordinates (top-left corner y, x and size h, w; may be
// fractional after scaling).
struct CropBox {
  double y = 0, x = 0, h = 0, w = 0;
};

// torchvision's RandomResizedCrop box for an image of height x width: up to 10 attempts at an
// area fraction uniform in [0.08, 1] and an aspect ratio (w/h) log-uniform in [3/4, 4/3] that
// fits, placed uniformly; then the centre crop of the whole image clamped to that ratio range.
// Integer sizes and positions. Deterministic for a given rng state.
CropBox random_resized_crop_box(int height, int width, Rng& rng);

// Evaluation: the region of the original image that torchvision's Resize(int(size /
// crop_fraction)) + CenterCrop(size) keeps, generalised to out_h x out_w (the image resized to
// cover (out_h, out_w) / crop_fraction keeping its aspect ratio, in whole pixels, then the centre
// out_h x out_w). crop_fraction 0.875: shorter side to size/0.875 (256 for 224); 1.0: resize to
// cover, then centre crop.
CropBox center_crop_box(int height, int width, int out_h, int out_w, double crop_fraction);

// Caffe's crop (DataTransformer) of an out_h x out_w window from a height x width image, in whole
// pixels: in training (`random`) the offsets uniform in [0, height - out_h] and [0, width - out_w]
// and a mirror with probability 1/2; otherwise the centre ((height - out_h) / 2, (width - out_w) /
// 2, rounded down as Caffe's integer division), not mirrored. Needs out_h <= height, out_w <= width.
struct PixelCrop {
  int y = 0, x = 0;
  bool mirror = false;
};
PixelCrop caffe_crop(int height, int width, int out_h, int out_w, bool random, Rng& rng);

// Copies the out_h x out_w window at (crop.y, crop.x) of src to out (out_h, out_w, 3), mirrored
// left-right when crop.mirror.
void copy_crop(const RgbImage& src, const PixelCrop& crop, int out_h, int out_w, uint8_t* out);

// Bilinear resample of `box` of src (half-pixel centres, as torchvision's resize without
// antialiasing; coordinates clamped to the image) to out_h x out_w, mirrored left-right when
// `flip`, rounded to uint8.
void resample_crop(const RgbImage& src, const CropBox& box, int out_h, int out_w, bool flip, uint8_t* out);

}  // namespace scaletrain::data
