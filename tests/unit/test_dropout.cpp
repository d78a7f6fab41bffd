// Dropout's stream and statistics: Philox4x32-10 (core/philox.hpp and the reference's own) on
// Random123's known answers, the threshold and scale, argument checks, the kept fraction over
// 10^6 elements, masks that change with the position and the key but not with the thread count,
// and p = 0 as an exact copy. The kernels against the float64 reference, in place and out of
// place, and the backward against central differences, are op cases (tests/support/op_cases.cpp).
#include <array>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "scaletrain/core/error.hpp"
#include "scaletrain/core/philox.hpp"
#include "scaletrain/core/rng.hpp"
#include "scaletrain/ops/dropout.hpp"
#include "support/gradcheck.hpp"
#include "support/reference_dropout.hpp"

namespace st = scaletrain;
using st::test::check_throws;

namespace {

struct KnownAnswer {
  std::array<uint32_t, 4> counter;
  std::array<uint32_t, 2> key;
  std::array<uint32_t, 4> out;
};

// Random123's kat_vectors, philox4x32 with 10 rounds (the last counter and key are pi's digits).
const KnownAnswer kKnownAnswers[] = {
    {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
     {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
     {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};

std::array<uint32_t, 4> header_philox(const std::array<uint32_t, 4>& c, const std::array<uint32_t, 2>& k) {
  const st::philox::Block b = st::philox::philox4x32_10(c[0], c[1], c[2], c[3], k[0], k[1]);
  return {b.w[0], b.w[1], b.w[2], b.w[3]};
}

st::ops::DropoutParams params_of(double p, uint32_t k0, uint32_t k1, uint64_t position) {
  st::ops::DropoutParams params;
  params.p = p;
  params.key[0] = k0;
  params.key[1] = k1;
  params.position = position;
  return params;
}

// The keep bits the CPU kernel applies: dropout of ones (kept elements are the nonzero ones).
std::vector<bool> kernel_mask(st::Context& ctx, const st::ops::DropoutParams& params, int64_t n) {
  st::Tensor ones = st::Tensor::empty({n}, st::DType::f32), y = st::test::nan_tensor({n});
  ones.fill(1.0f);
  st::ops::dropout_forward(ctx, params, ones, y);
  std::vector<bool> keep(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) keep[static_cast<std::size_t>(i)] = y.data<float>()[i] != 0.0f;
  return keep;
}

double kept_fraction(const std::vector<bool>& keep) {
  int64_t kept = 0;
  for (bool k : keep) kept += k;
  return static_cast<double>(kept) / static_cast<double>(keep.size());
}

double agreement(const std::vector<bool>& a, const std::vector<bool>& b) {
  int64_t same = 0;
  for (std::size_t i = 0; i < a.size(); ++i) same += a[i] == b[i];
  return static_cast<double>(same) / static_cast<double>(a.size());
}

}  // namespace

BOOST_AUTO_TEST_SUITE(dropout)

BOOST_AUTO_TEST_CASE(philox_known_answers) {
  for (const KnownAnswer& k : kKnownAnswers) {
    BOOST_TEST(header_philox(k.counter, k.key) == k.out);
    BOOST_TEST(st::test::reference_philox4x32_10(k.counter, k.key) == k.out);
  }
  // The 64-bit halves form: (counter_lo, counter_hi) = ((c1 << 32) | c0, (c3 << 32) | c2).
  const KnownAnswer& pi = kKnownAnswers[2];
  const st::philox::Block b =
      st::philox::philox4x32_10_u64((uint64_t{pi.counter[1]} << 32) | pi.counter[0],
                                    (uint64_t{pi.counter[3]} << 32) | pi.counter[2], pi.key[0], pi.key[1]);
  BOOST_TEST((std::array<uint32_t, 4>{b.w[0], b.w[1], b.w[2], b.w[3]}) == pi.out);
}

// The header and the reference's own implementation agree away from the known answers too.
BOOST_AUTO_TEST_CASE(philox_header_matches_reference) {
  st::Rng rng(2024);
  for (int i = 0; i < 2000; ++i) {
    const uint64_t a = rng.next_u64(), b = rng.next_u64(), k = rng.next_u64();
    const std::array<uint32_t, 4> c{static_cast<uint32_t>(a), static_cast<uint32_t>(a >> 32), static_cast<uint32_t>(b),
                                    static_cast<uint32_t>(b >> 32)};
    const std::array<uint32_t, 2> key{static_cast<uint32_t>(k), static_cast<uint32_t>(k >> 32)};
    BOOST_TEST_REQUIRE(header_philox(c, key) == st::test::reference_philox4x32_10(c, key));
  }
}

BOOST_AUTO_TEST_CASE(threshold_and_scale) {
  BOOST_TEST(st::ops::dropout_threshold(0.0) == 0xFFFFFFFFu);  // clamped: 2^32 does not fit
  BOOST_TEST(st::ops::dropout_threshold(1e-12) == 0xFFFFFFFFu);
  BOOST_TEST(st::ops::dropout_threshold(0.5) == 0x80000000u);
  BOOST_TEST(st::ops::dropout_threshold(0.75) == 0x40000000u);
  BOOST_TEST(st::ops::dropout_threshold(0.1) == 3865470566u);  // round(0.9 * 2^32) = round(3865470566.4)
  BOOST_TEST(st::ops::dropout_threshold(std::nextafter(1.0, 0.0)) == 0u);
  BOOST_TEST(st::ops::dropout_scale(0.5) == 2.0f);
  BOOST_TEST(st::ops::dropout_scale(0.1) == static_cast<float>(1.0 / 0.9));
  BOOST_TEST(st::ops::dropout_scale(0.0) == 1.0f);
}

BOOST_AUTO_TEST_CASE(argument_checks) {
  st::Context ctx;
  st::Tensor x = st::Tensor::zeros({2, 3}), y = st::Tensor::zeros({2, 3}), other = st::Tensor::zeros({3, 2});
  st::Tensor xi = st::Tensor::zeros({2, 3}, st::DType::i32);
  check_throws([&] { st::ops::dropout_forward(ctx, params_of(1.0, 0, 0, 0), x, y); },
               {"dropout_forward", "p must be in [0, 1), got 1"});
  check_throws([&] { st::ops::dropout_backward(ctx, params_of(-0.25, 0, 0, 0), x, y); },
               {"dropout_backward", "got -0.25"});
  check_throws([&] { st::ops::dropout_forward(ctx, params_of(std::nan(""), 0, 0, 0), x, y); }, {"got nan"});
  check_throws([&] { st::ops::dropout_threshold(1.5); }, {"got 1.5"});
  check_throws([&] { st::ops::dropout_forward(ctx, params_of(0.5, 0, 0, 0), x, other); },
               {"dropout_forward", "y has shape [3, 2], expected [2, 3]"});
  check_throws([&] { st::ops::dropout_backward(ctx, params_of(0.5, 0, 0, 0), xi, y); },
               {"dropout_backward", "dy must be float32"});
}

// The kept fraction of 10^6 elements is within 5 standard deviations of 1 - p, and the kernel's
// mask is the reference's.
BOOST_AUTO_TEST_CASE(kept_fraction_is_one_minus_p) {
  st::Context ctx;
  constexpr int64_t n = 1000000;
  for (double p : {0.1, 0.5, 0.7, 0.99}) {
    BOOST_TEST_CONTEXT("p " << p) {
      const auto params = params_of(p, 0x12345678u, 0x9abcdef0u, 42);
      const std::vector<bool> keep = kernel_mask(ctx, params, n);
      const double sigma = std::sqrt(p * (1 - p) / n);
      BOOST_TEST(std::fabs(kept_fraction(keep) - (1 - p)) <= 5 * sigma, "kept " << kept_fraction(keep));
      BOOST_TEST((keep == st::test::reference_dropout_mask(n, p, {0x12345678u, 0x9abcdef0u}, 42)));
    }
  }
}

// Independent masks agree on p^2 + (1 - p)^2 of the elements: another position (the low and the
// high word), another key word, each gives such a mask; the same params give the same mask.
BOOST_AUTO_TEST_CASE(positions_and_keys_give_other_masks) {
  st::Context ctx;
  constexpr int64_t n = 1000000;
  const double p = 0.5, expected = p * p + (1 - p) * (1 - p);
  const double sigma = std::sqrt(expected * (1 - expected) / n);
  const std::vector<bool> base = kernel_mask(ctx, params_of(p, 1, 2, 7), n);
  BOOST_TEST((kernel_mask(ctx, params_of(p, 1, 2, 7), n) == base));
  for (const auto& params : {params_of(p, 1, 2, 8), params_of(p, 1, 2, 7 + (uint64_t{1} << 32)), params_of(p, 3, 2, 7),
                             params_of(p, 1, 3, 7)}) {
    BOOST_TEST_CONTEXT("key " << params.key[0] << "," << params.key[1] << " position " << params.position) {
      BOOST_TEST(std::fabs(agreement(kernel_mask(ctx, params, n), base) - expected) <= 5 * sigma);
    }
  }
  // Within one mask, the four words of a block and neighbouring blocks are not copies of each other.
  int64_t same_as_next = 0;
  for (int64_t i = 0; i + 1 < n; ++i) same_as_next += base[i] == base[i + 1];
  BOOST_TEST(std::fabs(static_cast<double>(same_as_next) / (n - 1) - expected) <= 5 * sigma);
}

// The mask is a function of (key, position, index): one thread and two give the same bits, and a
// prefix of a tensor has the mask of the prefix of a longer one.
BOOST_AUTO_TEST_CASE(mask_independent_of_threads_and_length) {
  st::Context one(st::Device::cpu, 1), two(st::Device::cpu, 2);
  const auto params = params_of(0.3, 99, 100, 5);
  const std::vector<bool> a = kernel_mask(one, params, 100003), b = kernel_mask(two, params, 100003);
  BOOST_TEST((a == b));
  const std::vector<bool> short_mask = kernel_mask(one, params, 1001);
  BOOST_TEST((std::vector<bool>(a.begin(), a.begin() + 1001) == short_mask));
}

// p = 0 copies every bit, NaN and -0 included; in place it leaves the tensor alone.
BOOST_AUTO_TEST_CASE(p_zero_is_an_exact_copy) {
  st::Context ctx;
  st::Tensor x = st::test::to_tensor(st::test::random_floats(1003, 5), {1003});
  x.data<float>()[3] = std::numeric_limits<float>::quiet_NaN();
  x.data<float>()[4] = -0.0f;
  x.data<float>()[5] = std::numeric_limits<float>::infinity();
  st::Tensor y = st::test::nan_tensor({1003});
  st::ops::dropout_forward(ctx, params_of(0.0, 1, 2, 3), x, y);
  BOOST_TEST(std::memcmp(x.raw(), y.raw(), x.bytes()) == 0);
  st::Tensor dx = st::test::nan_tensor({1003});
  st::ops::dropout_backward(ctx, params_of(0.0, 1, 2, 3), x, dx);
  BOOST_TEST(std::memcmp(x.raw(), dx.raw(), x.bytes()) == 0);
  st::Tensor same = x.clone();
  st::ops::dropout_forward(ctx, params_of(0.0, 1, 2, 3), same, same);
  BOOST_TEST(std::memcmp(x.raw(), same.raw(), x.bytes()) == 0);
}

// An empty tensor is no error.
BOOST_AUTO_TEST_CASE(empty_tensor) {
  st::Context ctx;
  st::Tensor x = st::Tensor::zeros({0, 5}), y = st::Tensor::zeros({0, 5});
  BOOST_CHECK_NO_THROW(st::ops::dropout_forward(ctx, params_of(0.5, 1, 2, 3), x, y));
  BOOST_CHECK_NO_THROW(st::ops::dropout_backward(ctx, params_of(0.0, 1, 2, 3), x, y));
}

BOOST_AUTO_TEST_SUITE_END()
