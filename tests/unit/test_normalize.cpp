// The model's input op, uint8 pixels (N, H, W, C) -> (x / 255 - mean[c]) / std[c] in float32:
// the argument checks and their messages. The values against the float64 formula (one rounding)
// for 1, 3 and 4 channels, one pixel and batches large enough to run on several threads are op
// cases (tests/support/op_cases.cpp).
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

BOOST_AUTO_TEST_SUITE_END()
