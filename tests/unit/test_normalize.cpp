// The model's input op, uint8 pixels (N, H, W, C) -> (x / 255 - mean[c]) / std[c] in float32:
// the argument checks and their messages. The values against the float64 formula (one rounding)
// for 1, 3 and 4 channels, one pixel and batches large enough to run on several threads are op
// cases (tests/support/op_cases.cpp), reversed channel orders too. Here: Caffe's input (BGR,
// pixel - mean) exactly, for every pixel value.
#include <boost/test/unit_test.hpp>
#include <string>
#include <vector>

#include "scaletrain/core/error.hpp"
#include "scaletrain/ops/normalize.hpp"

namespace st = scaletrain;

BOOST_AUTO_TEST_SUITE(normalize)

BOOST_AUTO_TEST_CASE(argument_checks) {
  st::Context ctx;
  const std::vector<double> mean3{0.5, 0.5, 0.5}, std3{0.25, 0.25, 0.25};
  st::Tensor x = st::Tensor::zeros({2, 4, 4, 3}, st::DType::u8), y = st::Tensor::empty({2, 4, 4, 3});
  auto fails_with = [&](auto&& call, const std::string& words) {
    try {
      call();
    } catch (const st::Error& e) {
      const std::string msg = e.what();
      BOOST_TEST(msg.find(words) != std::string::npos, msg);
      return;
    }
    BOOST_ERROR("no error for: " << words);
  };
  st::Tensor xf = st::Tensor::zeros({2, 4, 4, 3});
  fails_with([&] { st::ops::normalize_images(ctx, xf, mean3, std3, y); }, "must be uint8");
  st::Tensor small = st::Tensor::empty({2, 4, 4, 1});
  fails_with([&] { st::ops::normalize_images(ctx, x, mean3, std3, small); }, "[2, 4, 4, 1]");
  fails_with([&] { st::ops::normalize_images(ctx, x, {0.5}, std3, y); }, "3 channels but 1 means");
  fails_with([&] { st::ops::normalize_images(ctx, x, mean3, {0.25, 0.0, 0.25}, y); }, "not positive");
  st::Tensor flat = st::Tensor::zeros({12}, st::DType::u8), yflat = st::Tensor::empty({12});
  fails_with([&] { st::ops::normalize_images(ctx, flat, mean3, std3, yflat); }, "(N, H, W, C)");
  st::Tensor yi = st::Tensor::empty({2, 4, 4, 3}, st::DType::i32);
  fails_with([&] { st::ops::normalize_images(ctx, x, mean3, std3, yi); }, "float32");
}

// --preprocess caffe passes mean m / 255 and std 1 / 255 with the channels reversed: the result
// must be exactly pixel - m in float (Caffe subtracts the mean in float from whole pixels), for
// every pixel value 0..255 and bvlc_googlenet's means B 104, G 117, R 123, in BGR order.
BOOST_AUTO_TEST_CASE(caffe_mean_subtraction_is_exact_and_bgr) {
  st::Context ctx;
  const double bgr_mean[] = {104, 117, 123};
  const std::vector<double> mean{104 / 255.0, 117 / 255.0, 123 / 255.0}, std(3, 1 / 255.0);
  // Pixel p of 256: R = p, G = 255 - p, B = (p * 7) % 256, so that the channels differ.
  st::Tensor x = st::Tensor::empty({1, 16, 16, 3}, st::DType::u8), y = st::Tensor::empty({1, 16, 16, 3});
  uint8_t* rgb = x.data<uint8_t>();
  for (int p = 0; p < 256; ++p) {
    rgb[3 * p] = static_cast<uint8_t>(p);
    rgb[3 * p + 1] = static_cast<uint8_t>(255 - p);
    rgb[3 * p + 2] = static_cast<uint8_t>((p * 7) % 256);
  }
  st::ops::normalize_images(ctx, x, mean, std, y, st::ops::ChannelOrder::reversed);
  const float* bgr = y.data<float>();
  int wrong = 0;
  for (int p = 0; p < 256; ++p)
    for (int c = 0; c < 3; ++c) {
      const int pixel = rgb[3 * p + (2 - c)];  // output B reads input channel 2
      const float expected = static_cast<float>(pixel) - static_cast<float>(bgr_mean[c]);
      if (bgr[3 * p + c] != expected) {
        if (++wrong <= 5)
          BOOST_ERROR("pixel " << p << " channel " << c << ": " << bgr[3 * p + c] << " != " << expected);
      }
    }
  BOOST_TEST(wrong == 0);
  // Every value 0..255 in every channel against every whole mean 0..255: the same holds.
  st::Tensor all = st::Tensor::empty({1, 1, 256, 3}, st::DType::u8), out = st::Tensor::empty({1, 1, 256, 3});
  for (int v = 0; v < 256; ++v)
    for (int c = 0; c < 3; ++c) all.data<uint8_t>()[3 * v + c] = static_cast<uint8_t>(v);
  for (int m = 0; m < 256; ++m) {
    const std::vector<double> mm(3, m / 255.0);
    st::ops::normalize_images(ctx, all, mm, std, out, st::ops::ChannelOrder::reversed);
    for (int i = 0; i < 256 * 3; ++i) wrong += out.data<float>()[i] != static_cast<float>(i / 3 - m);
  }
  BOOST_TEST(wrong == 0);
}

BOOST_AUTO_TEST_CASE(the_default_order_is_as_stored) {
  st::Context ctx;
  st::Tensor x = st::Tensor::empty({1, 1, 1, 3}, st::DType::u8), a = st::Tensor::empty({1, 1, 1, 3}),
             b = st::Tensor::empty({1, 1, 1, 3});
  x.data<uint8_t>()[0] = 10;
  x.data<uint8_t>()[1] = 20;
  x.data<uint8_t>()[2] = 30;
  const std::vector<double> zero(3, 0.0), unit(3, 1 / 255.0);
  st::ops::normalize_images(ctx, x, zero, unit, a);
  st::ops::normalize_images(ctx, x, zero, unit, b, st::ops::ChannelOrder::reversed);
  for (int c = 0; c < 3; ++c) {
    BOOST_TEST(a.data<float>()[c] == 10.0f * static_cast<float>(c + 1));
    BOOST_TEST(b.data<float>()[c] == 10.0f * static_cast<float>(3 - c));
  }
}

BOOST_AUTO_TEST_SUITE_END()
