// Tests for JPEG datasets: decoding against the pixels that were encoded (within JPEG
// tolerance), DCT-scaled decoding against full decoding + resize, the evaluation crop's geometry
// against hand-derived coordinates, random resized crop bounds and determinism, flipping,
// corrupt data, and the jpeg shard writer / open_split round trip. --preprocess caffe: the crop's
// offsets and mirror, and the decoder's output as a crop of the image squashed to 256x256.
#include <unistd.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <filesystem>
#include <thread>

#include "scaletrain/core/error.hpp"
#include "scaletrain/data/dataset.hpp"
#include "scaletrain/data/image_ops.hpp"
#include "scaletrain/data/pipeline.hpp"
#include "scaletrain/io/hdf5.hpp"
#include "scaletrain/ops/normalize.hpp"

namespace fs = std::filesystem;
using namespace scaletrain;
using namespace scaletrain::data;

namespace {

// R = 255 x / (w - 1), G = 255 y / (h - 1), B = 64: linear, so bilinear resampling is exact.
std::vector<uint8_t> gradient(int h, int w) {
  std::vector<uint8_t> p(static_cast<std::size_t>(h) * w * 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      uint8_t* q = &p[(static_cast<std::size_t>(y) * w + x) * 3];
      q[0] = static_cast<uint8_t>(std::lround(255.0 * x / (w - 1)));
      q[1] = static_cast<uint8_t>(std::lround(255.0 * y / (h - 1)));
      q[2] = 64;
    }
  return p;
}

double max_abs_diff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  BOOST_REQUIRE_EQUAL(a.size(), b.size());
  int m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(int(a[i]) - int(b[i])));
  return m;
}

double mean_abs_diff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  BOOST_REQUIRE_EQUAL(a.size(), b.size());
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += std::abs(int(a[i]) - int(b[i]));
  return s / a.size();
}

SplitInfo jpeg_split(std::vector<double> mean = {0, 0, 0}, std::vector<double> std = {1, 1, 1}) {
  SplitInfo s;
  s.dir = "test/jpeg";
  s.encoding = "jpeg";
  s.channels = 3;
  s.num_classes = 2;
  s.mean = std::move(mean);
  s.std = std::move(std);
  return s;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(jpeg)

BOOST_AUTO_TEST_CASE(flat_colour_decodes_to_its_colour) {
  const int h = 48, w = 64;
  std::vector<uint8_t> px(h * w * 3);
  for (int i = 0; i < h * w; ++i) {
    px[3 * i] = 200;
    px[3 * i + 1] = 100;
    px[3 * i + 2] = 30;
  }
  const std::vector<uint8_t> jpeg = encode_jpeg(px.data(), h, w, 95);
  const JpegHeader hd = jpeg_header(jpeg.data(), jpeg.size());
  BOOST_TEST(hd.height == h);
  BOOST_TEST(hd.width == w);
  RgbImage img;
  BOOST_TEST(decode_jpeg(jpeg.data(), jpeg.size(), img) == 1.0);
  BOOST_TEST(img.height == h);
  BOOST_TEST(img.width == w);
  BOOST_TEST(max_abs_diff(img.pixels, px) <= 3);  // colour conversion rounding only
}

BOOST_AUTO_TEST_CASE(a_bad_jpeg_does_not_spoil_the_next_decode_on_the_thread) {
  // Found by fuzz_jpeg: after "Empty JPEG image (DNL not supported)" (a frame header of height 0,
  // which JPEG allows only with a DNL marker) libjpeg-turbo's handle failed every later decode on
  // the thread with "Bogus marker length", valid files included. Recipe: the height bytes of the
  // SOF0 marker (FF C0, length, precision, then height) of an encoded image set to 0.
  const int h = 16, w = 24;
  std::vector<uint8_t> px(static_cast<std::size_t>(h) * w * 3, 128);
  const std::vector<uint8_t> good = encode_jpeg(px.data(), h, w, 90);
  std::vector<uint8_t> bad = good;
  const uint8_t marker[2] = {0xFF, 0xC0};
  const auto sof = std::search(bad.begin(), bad.end(), std::begin(marker), std::end(marker));
  BOOST_REQUIRE(sof != bad.end());
  sof[5] = sof[6] = 0;
  RgbImage img;
  BOOST_CHECK_EXCEPTION(decode_jpeg(bad.data(), bad.size(), img), Error, [](const Error& e) {
    return std::string(e.what()).find("JPEG does not decode") != std::string::npos;
  });
  BOOST_CHECK_NO_THROW(decode_jpeg(good.data(), good.size(), img));
  BOOST_TEST(img.height == h);
  BOOST_TEST(img.width == w);
}

BOOST_AUTO_TEST_CASE(gradient_decodes_within_jpeg_tolerance) {
  const int h = 96, w = 128;
  const std::vector<uint8_t> px = gradient(h, w);
  const std::vector<uint8_t> jpeg = encode_jpeg(px.data(), h, w, 95);
  RgbImage img;
  decode_jpeg(jpeg.data(), jpeg.size(), img);
  BOOST_TEST(max_abs_diff(img.pixels, px) <= 8);
  BOOST_TEST(mean_abs_diff(img.pixels, px) <= 1.5);
}

BOOST_AUTO_TEST_CASE(dct_scaled_decode_matches_full_decode_and_resize) {
  const int h = 256, w = 320;
  const std::vector<uint8_t> px = gradient(h, w);
  const std::vector<uint8_t> jpeg = encode_jpeg(px.data(), h, w, 95);
  RgbImage full, scaled;
  decode_jpeg(jpeg.data(), jpeg.size(), full);
  // 64x80 needed: 1/4 is the smallest scale that covers it (1/8 gives 32x40).
  const double scale = decode_jpeg(jpeg.data(), jpeg.size(), scaled, 64, 80);
  BOOST_TEST(scale == 0.25);
  BOOST_TEST(scaled.height == 64);
  BOOST_TEST(scaled.width == 80);
  // 65 rows needed: 1/4 no longer covers, 3/8 (96x120) does.
  RgbImage bigger;
  BOOST_TEST(decode_jpeg(jpeg.data(), jpeg.size(), bigger, 65, 10) == 0.375);
  BOOST_TEST(bigger.height == 96);
  // Never upscales.
  RgbImage same;
  BOOST_TEST(decode_jpeg(jpeg.data(), jpeg.size(), same, 1000, 1000) == 1.0);
  BOOST_TEST(same.height == h);

  std::vector<uint8_t> resized(64 * 80 * 3);
  resample_crop(full, CropBox{0, 0, double(h), double(w)}, 64, 80, false, resized.data());
  BOOST_TEST(mean_abs_diff(scaled.pixels, resized) <= 2.0);
  BOOST_TEST(max_abs_diff(scaled.pixels, resized) <= 10);
}

BOOST_AUTO_TEST_CASE(center_crop_box_geometry) {
  // 375x500 to 224x224 as torchvision's Resize(256) + CenterCrop(224): resized to 256x341
  // (int(256 * 500 / 375)), crop from (16, round(58.5) = 58), back in original pixels.
  const CropBox b = center_crop_box(375, 500, 224, 224, 0.875);
  BOOST_TEST(b.y == 16 * 375 / 256.0, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(b.h == 224 * 375 / 256.0, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(b.x == 58 * 500 / 341.0, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(b.w == 224 * 500 / 341.0, boost::test_tools::tolerance(1e-9));
  // Portrait: 500x375 (HxW) resized to 341x256.
  const CropBox p = center_crop_box(500, 375, 224, 224, 0.875);
  BOOST_TEST(p.y == 58 * 500 / 341.0, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(p.x == 16 * 375 / 256.0, boost::test_tools::tolerance(1e-9));
  // Fraction 1: Resize(32) + CenterCrop(32): 32x42, crop from (0, 5).
  const CropBox c = center_crop_box(375, 500, 32, 32, 1.0);
  BOOST_TEST(c.y == 0.0);
  BOOST_TEST(c.h == 375.0, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(c.x == 5 * 500 / 42.0, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(c.w == 32 * 500 / 42.0, boost::test_tools::tolerance(1e-9));
}

BOOST_AUTO_TEST_CASE(eval_decode_is_the_centre_crop) {
  // 200x300 gradient to 32x32: Resize(int(32 / 0.875) = 36) gives 36x54, CenterCrop(32) starts
  // at (2, 11): in original pixels a 177.8-square crop from (2 * 200 / 36, 11 * 300 / 54). With
  // mean 0, std 1 the output is pixel / 255; for a linear gradient the bilinear sample at source
  // x is x / (w - 1) (the DCT-scaled decode keeps it linear within JPEG tolerance).
  const int h = 200, w = 300, out = 32;
  const std::vector<uint8_t> px = gradient(h, w);
  const std::vector<uint8_t> jpeg = encode_jpeg(px.data(), h, w, 95);
  LoaderOptions o;
  o.image_height = out;
  o.image_width = out;
  auto dec = make_jpeg_decoder(jpeg_split(), o);
  BOOST_TEST(dec->out_height() == out);
  BOOST_TEST(dec->out_width() == out);
  BOOST_TEST(dec->channels() == 3);
  std::vector<uint8_t> y(out * out * 3);
  Rng rng(1);
  dec->decode(jpeg.data(), jpeg.size(), false, rng, y.data());
  double worst = 0;
  for (int oy = 0; oy < out; ++oy)
    for (int ox = 0; ox < out; ++ox) {
      const double sx = 11 * 300 / 54.0 + (ox + 0.5) * 300 / 54.0 - 0.5;
      const double sy = 2 * 200 / 36.0 + (oy + 0.5) * 200 / 36.0 - 0.5;
      const uint8_t* p = &y[(oy * out + ox) * 3];
      worst = std::max({worst, std::abs(p[0] / 255.0 - sx / (w - 1)), std::abs(p[1] / 255.0 - sy / (h - 1)),
                        std::abs(p[2] / 255.0 - 64 / 255.0)});
    }
  BOOST_TEST(worst < 0.037);  // ~9 grey levels: DCT scaling blurs the gradient's ends a little
}

BOOST_AUTO_TEST_CASE(decoder_output_normalised_by_the_model_input_op) {
  // The decoder hands over uint8 pixels; ops::normalize_images (the model's first op) applies
  // the split's mean and std.
  const int h = 40, w = 40;
  std::vector<uint8_t> px(h * w * 3, 128);
  const std::vector<uint8_t> jpeg = encode_jpeg(px.data(), h, w, 95);
  LoaderOptions o;
  const std::vector<double> mean{0.485, 0.456, 0.406}, std{0.229, 0.224, 0.225};
  auto dec = make_jpeg_decoder(jpeg_split(mean, std), o);
  BOOST_TEST(dec->out_height() == 224);  // the default input size
  Tensor y = Tensor::empty({1, 224, 224, 3}, DType::u8);
  Rng rng(0);
  dec->decode(jpeg.data(), jpeg.size(), false, rng, y.data<uint8_t>());
  BOOST_TEST(std::abs(int(y.data<uint8_t>()[0]) - 128) <= 2);
  Context ctx(Device::cpu, 1);
  Tensor x = Tensor::empty(y.shape());
  ops::normalize_images(ctx, y, mean, std, x);
  for (int c = 0; c < 3; ++c) {
    const double expected = (128 / 255.0 - mean[c]) / std[c];
    BOOST_TEST(std::abs(x.data<float>()[c] - expected) < 2.0 / 255 / std[c]);
    BOOST_TEST(std::abs(x.data<float>()[(224 * 224 - 1) * 3 + c] - expected) < 2.0 / 255 / std[c]);
  }
}

BOOST_AUTO_TEST_CASE(random_resized_crop_bounds_and_determinism) {
  const int h = 375, w = 500;
  Rng a(42), b(42);
  for (int i = 0; i < 2000; ++i) {
    const CropBox x = random_resized_crop_box(h, w, a);
    const CropBox y = random_resized_crop_box(h, w, b);
    BOOST_TEST((x.y == y.y && x.x == y.x && x.h == y.h && x.w == y.w));
    BOOST_TEST(x.y >= 0);
    BOOST_TEST(x.x >= 0);
    BOOST_TEST(x.h >= 1);
    BOOST_TEST(x.w >= 1);
    BOOST_TEST(x.y + x.h <= h);
    BOOST_TEST(x.x + x.w <= w);
    BOOST_TEST(x.h == std::floor(x.h));
    const double area = x.h * x.w / (double(h) * w), ratio = x.w / x.h;
    BOOST_TEST(area >= 0.075);  // 0.08 up to rounding to whole pixels
    BOOST_TEST(area <= 1.0);
    BOOST_TEST(ratio >= 0.74);
    BOOST_TEST(ratio <= 1.35);
  }
  // A different seed gives different boxes.
  Rng c(43), d(42);
  int same = 0;
  for (int i = 0; i < 20; ++i) {
    const CropBox x = random_resized_crop_box(h, w, c), y = random_resized_crop_box(h, w, d);
    same += x.y == y.y && x.x == y.x && x.h == y.h && x.w == y.w;
  }
  BOOST_TEST(same < 20);
  // No attempt fits a 10x1000 strip: the fallback is the centred 10x13 (ratio 4/3) box.
  Rng e(7);
  const CropBox f = random_resized_crop_box(10, 1000, e);
  BOOST_TEST(f.h == 10);
  BOOST_TEST(f.w == 13);
  BOOST_TEST(f.y == 0);
  BOOST_TEST(f.x == 493);
}

BOOST_AUTO_TEST_CASE(flip_mirrors_exactly) {
  const int h = 30, w = 50;
  RgbImage img;
  img.height = h;
  img.width = w;
  img.pixels = gradient(h, w);
  for (std::size_t i = 0; i < img.pixels.size(); ++i) img.pixels[i] ^= static_cast<uint8_t>(i * 37);  // texture
  const CropBox box{3, 7, 20, 33};
  std::vector<uint8_t> plain(16 * 24 * 3), flipped(16 * 24 * 3);
  resample_crop(img, box, 16, 24, false, plain.data());
  resample_crop(img, box, 16, 24, true, flipped.data());
  for (int y = 0; y < 16; ++y)
    for (int x = 0; x < 24; ++x)
      for (int c = 0; c < 3; ++c) BOOST_TEST(plain[(y * 24 + x) * 3 + c] == flipped[(y * 24 + 23 - x) * 3 + c]);
}

BOOST_AUTO_TEST_CASE(training_decode_crops_and_flips_reproducibly) {
  // Red grows left to right: a flipped output's red falls along each row.
  const int h = 120, w = 160, out = 24;
  const std::vector<uint8_t> px = gradient(h, w);
  const std::vector<uint8_t> jpeg = encode_jpeg(px.data(), h, w, 95);
  LoaderOptions o;
  o.image_height = out;
  o.image_width = out;
  o.augment = true;
  auto dec = make_jpeg_decoder(jpeg_split(), o);
  int flips = 0, plain = 0;
  std::vector<uint8_t> y(out * out * 3), z(out * out * 3);
  for (uint64_t s = 0; s < 40; ++s) {
    Rng r1(s), r2(s);
    dec->decode(jpeg.data(), jpeg.size(), true, r1, y.data());
    dec->decode(jpeg.data(), jpeg.size(), true, r2, z.data());
    BOOST_TEST((y == z));  // the same rng state gives the same sample
    const int left = y[(out / 2 * out + 0) * 3], right = y[(out / 2 * out + out - 1) * 3];
    (left > right ? flips : plain) += 1;
  }
  BOOST_TEST(flips > 5);
  BOOST_TEST(plain > 5);
  // Without --augment, training decodes as evaluation does.
  LoaderOptions no_aug = o;
  no_aug.augment = false;
  auto plain_dec = make_jpeg_decoder(jpeg_split(), no_aug);
  Rng r1(1), r2(2);
  plain_dec->decode(jpeg.data(), jpeg.size(), true, r1, y.data());
  plain_dec->decode(jpeg.data(), jpeg.size(), false, r2, z.data());
  BOOST_TEST((y == z));
}

BOOST_AUTO_TEST_CASE(concurrent_decodes_match_serial_ones) {
  // decode() runs on every worker thread: 4 threads decoding images of different sizes at once
  // (one TurboJPEG handle and buffer per thread) give exactly the serial results.
  std::vector<std::vector<uint8_t>> jpegs;
  for (int i = 0; i < 4; ++i) {
    const std::vector<uint8_t> px = gradient(80 + 30 * i, 120 - 10 * i);
    jpegs.push_back(encode_jpeg(px.data(), 80 + 30 * i, 120 - 10 * i, 90));
  }
  LoaderOptions o;
  o.image_height = 20;
  o.image_width = 28;
  o.augment = true;
  auto dec = make_jpeg_decoder(jpeg_split({0.5, 0.5, 0.5}, {0.25, 0.25, 0.25}), o);
  const std::size_t n = 20 * 28 * 3;
  std::vector<std::vector<uint8_t>> serial(4, std::vector<uint8_t>(n)), parallel(4, std::vector<uint8_t>(n));
  for (int i = 0; i < 4; ++i) {
    Rng rng(100 + i);
    dec->decode(jpegs[i].data(), jpegs[i].size(), i % 2 == 0, rng, serial[i].data());
  }
  std::vector<std::thread> threads;
  bool all_equal[4] = {true, true, true, true};
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      for (int rep = 0; rep < 25; ++rep) {
        Rng rng(100 + i);
        dec->decode(jpegs[i].data(), jpegs[i].size(), i % 2 == 0, rng, parallel[i].data());
        all_equal[i] = all_equal[i] && parallel[i] == serial[i];
      }
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < 4; ++i) BOOST_TEST(all_equal[i]);
}

// Caffe's DataTransformer: training offsets uniform over every position (both ends reached), a
// mirror about half the time, reproducible from the rng state; evaluation the centre, rounded
// down, never mirrored.
BOOST_AUTO_TEST_CASE(caffe_crop_geometry) {
  Rng unused(0);
  const PixelCrop c227 = caffe_crop(256, 256, 227, 227, false, unused);
  BOOST_TEST((c227.y == 14 && c227.x == 14 && !c227.mirror));  // (256 - 227) / 2 = 14.5 -> 14
  const PixelCrop c224 = caffe_crop(256, 256, 224, 224, false, unused);
  BOOST_TEST((c224.y == 16 && c224.x == 16 && !c224.mirror));
  const PixelCrop rect = caffe_crop(256, 256, 227, 200, false, unused);
  BOOST_TEST((rect.y == 14 && rect.x == 28));
  const PixelCrop whole = caffe_crop(256, 256, 256, 256, true, unused);
  BOOST_TEST((whole.y == 0 && whole.x == 0));
  Rng a(5), b(5);
  int lo_y = 256, hi_y = -1, lo_x = 256, hi_x = -1, mirrors = 0;
  const int draws = 4000;
  for (int i = 0; i < draws; ++i) {
    const PixelCrop p = caffe_crop(256, 256, 227, 227, true, a);
    const PixelCrop q = caffe_crop(256, 256, 227, 227, true, b);
    BOOST_TEST((p.y == q.y && p.x == q.x && p.mirror == q.mirror));
    lo_y = std::min(lo_y, p.y);
    hi_y = std::max(hi_y, p.y);
    lo_x = std::min(lo_x, p.x);
    hi_x = std::max(hi_x, p.x);
    mirrors += p.mirror;
  }
  BOOST_TEST(lo_y == 0);
  BOOST_TEST(hi_y == 29);  // 256 - 227: every offset of a crop inside the image
  BOOST_TEST(lo_x == 0);
  BOOST_TEST(hi_x == 29);
  BOOST_TEST(mirrors > draws * 0.45);
  BOOST_TEST(mirrors < draws * 0.55);
  BOOST_CHECK_THROW(caffe_crop(256, 256, 257, 227, true, unused), Error);
}

// With real JPEG bytes: the decoder's output is exactly a crop of the image squashed to 256x256
// (one bilinear resample of the whole image, aspect not kept), at the offsets and mirror
// caffe_crop draws from the same rng state in training, at the centre in evaluation and in
// training without augmentation.
BOOST_AUTO_TEST_CASE(caffe_decode_is_a_crop_of_the_squashed_image) {
  const int h = 180, w = 320, out = 227;  // smaller than 256 one way: decoded at full size
  std::vector<uint8_t> px = gradient(h, w);
  for (std::size_t i = 0; i < px.size(); ++i) px[i] ^= static_cast<uint8_t>(i * 37);  // texture
  const std::vector<uint8_t> jpeg = encode_jpeg(px.data(), h, w, 90);
  RgbImage full, squashed;
  decode_jpeg(jpeg.data(), jpeg.size(), full);
  squashed.height = squashed.width = 256;
  squashed.pixels.resize(256 * 256 * 3);
  resample_crop(full, {0, 0, double(h), double(w)}, 256, 256, false, squashed.pixels.data());
  LoaderOptions o;
  o.image_height = out;
  o.image_width = out;
  o.augment = true;
  o.preprocess = "caffe";
  auto dec = make_jpeg_decoder(jpeg_split(), o);
  BOOST_TEST(dec->out_height() == out);
  std::vector<uint8_t> y(out * out * 3), expected(out * out * 3);
  int mirrors = 0, offsets_seen = 0, last_x = -1;
  for (uint64_t s = 0; s < 30; ++s) {
    Rng r1(s), r2(s);
    dec->decode(jpeg.data(), jpeg.size(), true, r1, y.data());
    const PixelCrop crop = caffe_crop(256, 256, out, out, true, r2);
    copy_crop(squashed, crop, out, out, expected.data());
    BOOST_TEST((y == expected), "seed " << s);
    mirrors += crop.mirror;
    offsets_seen += crop.x != last_x;
    last_x = crop.x;
  }
  BOOST_TEST(mirrors > 5);
  BOOST_TEST(mirrors < 25);
  BOOST_TEST(offsets_seen > 10);
  // Evaluation, and training without augmentation: the centre crop at (14, 14), not mirrored.
  Rng unused(0);
  copy_crop(squashed, {14, 14, false}, out, out, expected.data());
  dec->decode(jpeg.data(), jpeg.size(), false, unused, y.data());
  BOOST_TEST((y == expected));
  LoaderOptions no_aug = o;
  no_aug.augment = false;
  make_jpeg_decoder(jpeg_split(), no_aug)->decode(jpeg.data(), jpeg.size(), true, unused, y.data());
  BOOST_TEST((y == expected));
  // A mirrored crop is the plain one read backwards.
  std::vector<uint8_t> plain(out * out * 3), mirrored(out * out * 3);
  copy_crop(squashed, {3, 20, false}, out, out, plain.data());
  copy_crop(squashed, {3, 20, true}, out, out, mirrored.data());
  for (int r = 0; r < out; ++r)
    for (int c = 0; c < out; ++c)
      for (int k = 0; k < 3; ++k) BOOST_TEST(plain[(r * out + c) * 3 + k] == mirrored[(r * out + out - 1 - c) * 3 + k]);
}

// Squashed, not cropped to keep the aspect: a 600x1000 gradient (decoded at 1/2 scale, the
// smallest with 256 pixels each way) to --image-size 256,256 in evaluation is the whole image,
// red and green each from 0 to 255; at 224 the centre crop starts 16 pixels in.
BOOST_AUTO_TEST_CASE(caffe_squash_keeps_the_whole_image) {
  const int h = 600, w = 1000;
  const std::vector<uint8_t> px = gradient(h, w);
  const std::vector<uint8_t> jpeg = encode_jpeg(px.data(), h, w, 95);
  for (int out : {256, 224}) {
    LoaderOptions o;
    o.image_height = out;
    o.image_width = out;
    o.preprocess = "caffe";
    std::vector<uint8_t> y(out * out * 3);
    Rng rng(0);
    make_jpeg_decoder(jpeg_split(), o)->decode(jpeg.data(), jpeg.size(), false, rng, y.data());
    const int off = (256 - out) / 2;
    double worst = 0;
    for (int oy = 0; oy < out; ++oy)
      for (int ox = 0; ox < out; ++ox) {
        // Source coordinates of the squash's pixel (oy + off, ox + off), as fractions of the image.
        const double fx = std::clamp(((ox + off + 0.5) * w / 256.0 - 0.5) / (w - 1), 0.0, 1.0);
        const double fy = std::clamp(((oy + off + 0.5) * h / 256.0 - 0.5) / (h - 1), 0.0, 1.0);
        const uint8_t* p = &y[(oy * out + ox) * 3];
        worst = std::max({worst, std::abs(p[0] / 255.0 - fx), std::abs(p[1] / 255.0 - fy)});
      }
    BOOST_TEST(worst < 0.037, "image size " << out);
  }
}

BOOST_AUTO_TEST_CASE(caffe_options_are_checked) {
  LoaderOptions o;
  o.preprocess = "caffe";
  o.image_height = 299;
  o.image_width = 299;
  BOOST_CHECK_EXCEPTION(make_jpeg_decoder(jpeg_split(), o), Error, [](const Error& e) {
    return std::string(e.what()).find("squashed to 256x256: --image-size 299,299 is larger") != std::string::npos;
  });
  o.preprocess = "bogus";
  o.image_height = o.image_width = 0;
  BOOST_CHECK_EXCEPTION(make_jpeg_decoder(jpeg_split(), o), Error, [](const Error& e) {
    return std::string(e.what()).find("unknown --preprocess 'bogus' (known: torchvision, caffe)") != std::string::npos;
  });
}

BOOST_AUTO_TEST_CASE(corrupt_jpeg_is_a_clear_error) {
  auto dec = make_jpeg_decoder(jpeg_split(), LoaderOptions());
  std::vector<uint8_t> y(224 * 224 * 3);
  Rng rng(0);
  const std::vector<uint8_t> garbage = {'n', 'o', 't', ' ', 'a', ' ', 'j', 'p', 'e', 'g'};
  try {
    dec->decode(garbage.data(), garbage.size(), false, rng, y.data());
    BOOST_FAIL("garbage decoded");
  } catch (const Error& e) {
    const std::string msg = e.what();
    BOOST_TEST_MESSAGE(msg);
    BOOST_TEST(msg.find("JPEG does not decode") != std::string::npos);
    BOOST_TEST(msg.find("Not a JPEG file") != std::string::npos);  // libjpeg-turbo's own words
  }
  // A truncated file (header intact, most of the scan missing).
  const std::vector<uint8_t> px = gradient(64, 64);
  std::vector<uint8_t> jpeg = encode_jpeg(px.data(), 64, 64, 95);
  jpeg.resize(jpeg.size() / 3);
  BOOST_CHECK_THROW(dec->decode(jpeg.data(), jpeg.size(), false, rng, y.data()), Error);
  BOOST_CHECK_THROW(dec->decode(jpeg.data(), 0, false, rng, y.data()), Error);
}

BOOST_AUTO_TEST_CASE(jpeg_shard_round_trip) {
  io::h5_silence_errors();
  const fs::path dir = fs::temp_directory_path() / ("scaletrain_test_jpeg_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "train");
  std::vector<std::vector<uint8_t>> jpegs;
  for (int i = 0; i < 5; ++i) {
    const std::vector<uint8_t> px = gradient(20 + i, 30);
    jpegs.push_back(encode_jpeg(px.data(), 20 + i, 30, 90));
  }
  Tensor labels = Tensor::empty({5}, DType::i32);
  for (int i = 0; i < 5; ++i) labels.data<int32_t>()[i] = i % 3;
  const std::vector<double> mean = {0.485, 0.456, 0.406}, std = {0.229, 0.224, 0.225};
  write_jpeg_shard((dir / "train" / shard_file_name(0, 2)).string(), jpegs, labels, 3, mean, std);
  write_jpeg_shard((dir / "train" / shard_file_name(1, 2)).string(), {}, Tensor::empty({0}, DType::i32), 3, mean, std);
  const SplitInfo s = open_split(dir.string(), "train");
  BOOST_TEST(s.encoding == "jpeg");
  BOOST_TEST(s.samples == 5);
  BOOST_TEST(s.channels == 3);
  BOOST_TEST(s.height == 0);
  BOOST_TEST(s.width == 0);
  BOOST_TEST(s.num_classes == 3);
  BOOST_TEST((s.mean == mean));
  BOOST_REQUIRE(s.shards[0].jpeg_offsets);
  BOOST_TEST(s.shards[0].jpeg_offsets->size() == 6u);
  BOOST_TEST(s.shards[1].jpeg_offsets->size() == 1u);
  // A sample without bytes is refused by the writer.
  BOOST_CHECK_THROW(write_jpeg_shard((dir / "empty.h5").string(), {{}}, Tensor::zeros({1}, DType::i32), 3, mean, std),
                    Error);
  {
    io::H5File f(s.shards[0].path, io::H5File::Mode::read);
    // Format 2: the samples' bytes concatenated, and N + 1 offsets.
    BOOST_TEST(f.get_int_attribute("scaletrain_format") == 2);
    BOOST_TEST(f.dataset_type("jpeg") == "uint8");
    const Tensor offsets = f.read("jpeg_offsets", DType::i64);
    BOOST_REQUIRE(offsets.numel() == 6);
    const Tensor bytes = f.read("jpeg", DType::u8);
    for (int i = 0; i < 5; ++i) {
      const int64_t* o = offsets.data<int64_t>();
      const std::vector<uint8_t> got(bytes.data<uint8_t>() + o[i], bytes.data<uint8_t>() + o[i + 1]);
      BOOST_TEST((got == jpegs[i]), "sample " << i);
    }
    BOOST_TEST(offsets.data<int64_t>()[5] == bytes.numel());
    BOOST_TEST(f.get_string_attribute("encoding") == "jpeg");
    BOOST_TEST(f.has_attribute("checksum"));
  }
  // Bad labels are refused by the writer.
  Tensor bad = Tensor::empty({5}, DType::i32);
  for (int i = 0; i < 5; ++i) bad.data<int32_t>()[i] = 3;
  BOOST_CHECK_THROW(write_jpeg_shard((dir / "bad.h5").string(), jpegs, bad, 3, mean, std), Error);
  // Mixing encodings within a split is refused, naming the file.
  Tensor images = Tensor::zeros({1, 2, 2, 3}, DType::u8);
  Tensor one = Tensor::zeros({1}, DType::i32);
  write_image_shard((dir / "train" / "z.h5").string(), images, one, 3, mean, std);
  try {
    open_split(dir.string(), "train");
    BOOST_FAIL("mixed encodings accepted");
  } catch (const Error& e) {
    BOOST_TEST(std::string(e.what()).find("z.h5: encoding 'raw'") != std::string::npos);
  }
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()
