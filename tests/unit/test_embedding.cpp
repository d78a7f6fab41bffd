// Embedding lookup: the backward's scatter-add with many repeated indices (exactly the
// position-order float sum, for any thread count), and the index and argument checks with their
// messages. The kernels against the float64 reference (repeated ids, a one-row table) and the
// backward against central differences of the forward are op cases (tests/support/op_cases.cpp).
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <string>

#include "scaletrain/core/error.hpp"
#include "scaletrain/core/rng.hpp"
#include "scaletrain/ops/embedding.hpp"
#include "support/gradcheck.hpp"
#include "support/reference_embedding.hpp"

namespace st = scaletrain;
using scaletrain::test::nan_tensor;
using scaletrain::test::random_floats;

namespace {

st::Tensor index_tensor(const std::vector<int32_t>& v) {
  st::Tensor t = st::Tensor::empty({static_cast<int64_t>(v.size())}, st::DType::i32);
  std::copy(v.begin(), v.end(), t.data<int32_t>());
  return t;
}

auto mentions(const char* text) {
  return [text](const st::Error& e) {
    const bool found = std::string(e.what()).find(text) != std::string::npos;
    if (!found) BOOST_TEST_MESSAGE("error message: " << e.what());
    return found;
  };
}

}  // namespace

BOOST_AUTO_TEST_SUITE(embedding)

// Three rows named 3000 times each in a shuffled order, one row never: every sum must be the float
// sum in position order, bit for bit, whatever the number of threads; the unnamed row is zero.
BOOST_AUTO_TEST_CASE(repeated_indices_sum_in_position_order) {
  const int64_t rows = 4, d = 37, n = 9000;
  std::vector<int32_t> idx(n);
  for (int64_t i = 0; i < n; ++i) idx[i] = static_cast<int32_t>(i % 3 == 0 ? 0 : i % 3 == 1 ? 2 : 3);
  st::Rng rng(5);
  for (int64_t i = n - 1; i > 0; --i) std::swap(idx[i], idx[static_cast<int64_t>(rng.uniform(0.0, i + 1.0)) % (i + 1)]);
  const auto dout = random_floats(n * d, 6);
  std::vector<float> serial(rows * d, 0.0f);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < d; ++j) serial[idx[i] * d + j] += static_cast<float>(dout[i * d + j]);
  const std::vector<double> want(serial.begin(), serial.end());

  const int original = st::Context().threads();
  for (int threads : {1, 2, 3, 7}) {
    BOOST_TEST_CONTEXT(threads << " threads") {
      st::Context ctx(st::Device::cpu, threads);
      st::Tensor dtable = nan_tensor({rows, d});
      st::ops::embedding_backward(ctx, index_tensor(idx), st::test::to_tensor(dout, {n, d}), dtable);
      const auto got = st::test::to_vector(dtable);
      BOOST_TEST(got == want);
      BOOST_TEST(std::all_of(got.begin() + d, got.begin() + 2 * d, [](double v) { return v == 0.0; }));
    }
  }
  st::Context restore(st::Device::cpu, original);
  // And the float sum is the double sum to float accuracy.
  ST_CHECK_CLOSE_VECTORS(want, st::test::reference_embedding_backward(rows, d, idx, dout), 1e-4, 1e-5);
}

BOOST_AUTO_TEST_CASE(index_out_of_range_names_index_position_and_size) {
  st::Context ctx;
  const st::Tensor table = st::Tensor::zeros({7, 4});
  st::Tensor out = st::Tensor::zeros({5, 4}), dtable = st::Tensor::zeros({7, 4}), dout = st::Tensor::zeros({5, 4});
  const st::Tensor too_big = index_tensor({0, 6, 2, 7, 1});
  const st::Tensor negative = index_tensor({0, 1, -1, 3, 4});
  BOOST_CHECK_EXCEPTION(st::ops::embedding_forward(ctx, table, too_big, out), st::Error,
                        mentions("index 7 at position 3 is outside the table of 7 rows"));
  BOOST_CHECK_EXCEPTION(st::ops::embedding_forward(ctx, table, negative, out), st::Error,
                        mentions("index -1 at position 2 is outside the table of 7 rows"));
  BOOST_CHECK_EXCEPTION(st::ops::embedding_backward(ctx, too_big, dout, dtable), st::Error,
                        mentions("embedding_backward: index 7 at position 3"));
}

BOOST_AUTO_TEST_CASE(argument_checks) {
  st::Context ctx;
  const st::Tensor table = st::Tensor::zeros({7, 4}), idx = index_tensor({1, 2, 3});
  st::Tensor out = st::Tensor::zeros({3, 4}), undefined;
  st::Tensor idx64 = st::Tensor::zeros({3}, st::DType::i64), idx2d = st::Tensor::zeros({3, 1}, st::DType::i32);
  st::Tensor wrong_out = st::Tensor::zeros({3, 5}), table1d = st::Tensor::zeros({28});
  BOOST_CHECK_EXCEPTION(st::ops::embedding_forward(ctx, table, idx64, out), st::Error,
                        mentions("indices must be int32, got int64"));
  BOOST_CHECK_EXCEPTION(st::ops::embedding_forward(ctx, table, idx2d, out), st::Error,
                        mentions("indices must be (N), got [3, 1]"));
  BOOST_CHECK_EXCEPTION(st::ops::embedding_forward(ctx, table, idx, wrong_out), st::Error,
                        mentions("out has shape [3, 5], expected [3, 4]"));
  BOOST_CHECK_EXCEPTION(st::ops::embedding_forward(ctx, table1d, idx, out), st::Error,
                        mentions("table must be (V, D), got [28]"));
  BOOST_CHECK_THROW(st::ops::embedding_forward(ctx, undefined, idx, out), st::Error);
  st::Tensor dtable = st::Tensor::zeros({7, 4});
  BOOST_CHECK_EXCEPTION(st::ops::embedding_backward(ctx, idx, wrong_out, dtable), st::Error,
                        mentions("dout has shape [3, 5], expected [3, 4]"));
}

BOOST_AUTO_TEST_SUITE_END()
