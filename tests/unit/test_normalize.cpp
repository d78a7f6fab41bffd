// The model's input op: uint8 pixels (N, H, W, C) -> (x / 255 - mean[c]) / std[c] in float32,
// against a float64 formula evaluated per element (exact after the single rounding), for 1, 3 and
// 4 channels and for batches large enough to run on several threads; argument checks.
#include <boost/test/unit_test.hpp>
#include <limits>
#include <string>

#include "scaletrain/core/error.hpp"
#include "scaletrain/core/rng.hpp"
#include "scaletrain/ops/normalize.hpp"

namespace st = scaletrain;

BOOST_AUTO_TEST_SUITE(normalize)

BOOST_AUTO_TEST_CASE(matches_the_formula_per_channel) {
  st::Context ctx(st::Device::cpu, 2);
  const std::vector<st::Shape> shapes{{1, 1, 1, 1}, {2, 3, 5, 3}, {3, 7, 4, 4}, {16, 64, 64, 3}, {5, 32, 33, 1}};
  for (const st::Shape& shape : shapes) {
    const int c = static_cast<int>(shape[3]);
    std::vector<double> mean, std;
    for (int ch = 0; ch < c; ++ch) {
      mean.push_back(0.1 + 0.2 * ch);
      std.push_back(0.15 + 0.05 * ch);
    }
    st::Tensor x = st::Tensor::empty(shape, st::DType::u8);
    st::Rng rng(shape[1] * 31 + c);
    for (int64_t i = 0; i < x.numel(); ++i) x.data<uint8_t>()[i] = static_cast<uint8_t>(rng.below(256));
    x.data<uint8_t>()[0] = 0;
    x.data<uint8_t>()[x.numel() - 1] = 255;
    st::Tensor y = st::Tensor::empty(shape);
    y.fill(std::numeric_limits<float>::quiet_NaN());  // every output must be written
    st::ops::normalize_images(ctx, x, mean, std, y);
    int64_t wrong = 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      const int ch = static_cast<int>(i % c);  // channels-last
      const float expected = static_cast<float>((x.data<uint8_t>()[i] / 255.0 - mean[ch]) / std[ch]);
      wrong += !(y.data<float>()[i] == expected);
    }
    BOOST_TEST(wrong == 0, "shape " << st::shape_string(shape));
  }
}

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

BOOST_AUTO_TEST_SUITE_END()
