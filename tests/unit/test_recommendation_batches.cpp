// Tests for NCF's per-rank training batches (data::RecommendationBatches): counts, the 1:k label
// ratio, every sample once per epoch over the ranks, negatives that are never a positive of their
// user, independence of the world size, fresh negatives per epoch, resuming at a step, and the
// keyed permutation under it.
#include <boost/test/unit_test.hpp>
#include <map>
#include <set>
#include <tuple>

#include "scaletrain/core/error.hpp"
#include "scaletrain/data/negative_sampler.hpp"
#include "scaletrain/data/recommendation_batches.hpp"
#include "support/gradcheck.hpp"

using namespace scaletrain;
using namespace scaletrain::data;
using scaletrain::test::check_throws;

namespace {

using Sample = std::tuple<int32_t, int32_t, float>;  // (user, item, label)

// 60 distinct positives of 12 users over 40 items: user u has 3 + u % 4 + (u < 6) items, (3u + 7j)
// mod 40 for j = 0, 1, ... (7 is prime to 40: distinct). 5 x 60 = 300 samples per epoch: divisible
// by 1, 2 and 3 ranks x batch 10.
RecommendationSplit small_split() {
  RecommendationSplit s;
  s.dir = "memory/train";
  s.num_users = 12;
  s.num_items = 40;
  for (int32_t u = 0; u < 12; ++u)
    for (int32_t j = 0; j < 3 + u % 4 + (u < 6 ? 1 : 0); ++j) {
      s.user.push_back(u);
      s.item.push_back((3 * u + 7 * j) % 40);
    }
  return s;
}

std::vector<Sample> epoch_samples(RecommendationBatches& b, int epoch, int64_t first_step = 0) {
  std::vector<Sample> out;
  b.start_epoch(epoch, first_step);
  Tensor users, items, labels;
  while (b.next(users, items, labels)) {
    BOOST_REQUIRE(users.dtype() == DType::i32 && items.dtype() == DType::i32 && labels.dtype() == DType::f32);
    BOOST_REQUIRE_EQUAL(users.numel(), items.numel());
    BOOST_REQUIRE_EQUAL(users.numel(), labels.numel());
    for (int64_t i = 0; i < users.numel(); ++i)
      out.emplace_back(users.data<int32_t>()[i], items.data<int32_t>()[i], labels.data<float>()[i]);
  }
  return out;
}

std::multiset<Sample> all_ranks(const RecommendationSplit& s, int world, int64_t batch, int epoch, uint64_t seed) {
  std::multiset<Sample> all;
  for (int r = 0; r < world; ++r) {
    RecommendationBatches b(s, r, world, batch, 4, seed);
    for (const Sample& x : epoch_samples(b, epoch)) all.insert(x);
  }
  return all;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(recommendation_batches)

BOOST_AUTO_TEST_CASE(epoch_permutation_is_a_bijection_keyed_by_seed_and_epoch) {
  for (int64_t size : {1, 2, 3, 5, 16, 17, 1000, 4097}) {
    const EpochPermutation p(size, 7, 3);
    std::vector<int> hits(size, 0);
    for (int64_t i = 0; i < size; ++i) {
      const int64_t v = p.at(i);
      BOOST_REQUIRE(v >= 0 && v < size);
      ++hits[v];
    }
    for (int64_t v = 0; v < size; ++v) BOOST_REQUIRE_MESSAGE(hits[v] == 1, "size " << size << " value " << v);
  }
  const EpochPermutation a(1000, 7, 0), b(1000, 7, 1), c(1000, 8, 0), same(1000, 7, 0);
  int differ_epoch = 0, differ_seed = 0, fixed_points = 0, equal = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    differ_epoch += a.at(i) != b.at(i);
    differ_seed += a.at(i) != c.at(i);
    fixed_points += a.at(i) == i;
    equal += a.at(i) == same.at(i);
  }
  BOOST_CHECK_EQUAL(equal, 1000);
  BOOST_CHECK_GT(differ_epoch, 950);  // about 999 for independent permutations
  BOOST_CHECK_GT(differ_seed, 950);
  BOOST_CHECK_LT(fixed_points, 10);  // about 1
}

BOOST_AUTO_TEST_CASE(counts_and_label_ratio) {
  const RecommendationSplit s = small_split();
  BOOST_REQUIRE_EQUAL(s.rows(), 60);
  RecommendationBatches b(s, 0, 1, 10);
  BOOST_CHECK_EQUAL(b.total_samples(), 300);
  BOOST_CHECK_EQUAL(b.steps_per_epoch(), 30);
  BOOST_CHECK_EQUAL(b.samples_per_epoch(), 300);
  const std::vector<Sample> e = epoch_samples(b, 0);
  BOOST_CHECK_EQUAL(e.size(), 300u);
  int64_t positives = 0;
  for (const Sample& x : e) positives += std::get<2>(x) == 1.0f;
  BOOST_CHECK_EQUAL(positives, 60);
  for (const Sample& x : e) BOOST_CHECK(std::get<2>(x) == 0.0f || std::get<2>(x) == 1.0f);

  // drop_last: 300 / 4 = 75 per rank, 10 batches of 7, the same on every rank.
  for (int r = 0; r < 4; ++r) {
    RecommendationBatches d(s, r, 4, 7, 4, 1);
    BOOST_CHECK_EQUAL(d.steps_per_epoch(), 10);
    BOOST_CHECK_EQUAL(d.samples_per_epoch(), 70);
    int64_t batches = 0;
    Tensor u, i, l;
    d.start_epoch(2);
    while (d.next(u, i, l)) {
      BOOST_CHECK_EQUAL(u.numel(), 7);
      ++batches;
    }
    BOOST_CHECK_EQUAL(batches, 10);
    BOOST_CHECK(!d.next(u, i, l));  // stays at the end
  }
  // Another k: 60 x (1 + 2).
  RecommendationBatches k2(s, 0, 1, 6, 2, 0);
  BOOST_CHECK_EQUAL(k2.total_samples(), 180);
  int64_t pos2 = 0;
  for (const Sample& x : epoch_samples(k2, 0)) pos2 += std::get<2>(x) == 1.0f;
  BOOST_CHECK_EQUAL(pos2, 60);
}

BOOST_AUTO_TEST_CASE(every_sample_once_per_epoch_over_the_ranks) {
  const RecommendationSplit s = small_split();
  std::multiset<std::pair<int32_t, int32_t>> expected;
  for (int64_t i = 0; i < s.rows(); ++i) expected.insert({s.user[i], s.item[i]});
  for (int world : {1, 2, 3}) {
    std::multiset<std::pair<int32_t, int32_t>> positives;
    std::vector<int> ids(300, 0);
    std::map<int32_t, int64_t> negatives_per_user, positives_per_user;
    for (int r = 0; r < world; ++r) {
      RecommendationBatches b(s, r, world, 10, 4, 5);
      BOOST_REQUIRE_EQUAL(b.samples_per_epoch() * world, 300);
      for (int64_t i = 0; i < b.samples_per_epoch(); ++i) ++ids.at(b.sample_id(1, i));
      for (const Sample& x : epoch_samples(b, 1)) {
        if (std::get<2>(x) == 1.0f) {
          positives.insert({std::get<0>(x), std::get<1>(x)});
          ++positives_per_user[std::get<0>(x)];
        } else {
          ++negatives_per_user[std::get<0>(x)];
        }
      }
    }
    for (int id = 0; id < 300; ++id) BOOST_REQUIRE_MESSAGE(ids[id] == 1, "world " << world << " sample " << id);
    BOOST_CHECK_MESSAGE(positives == expected, "world " << world << ": positives differ from the split's");
    for (const auto& [u, n] : positives_per_user) BOOST_CHECK_EQUAL(negatives_per_user[u], 4 * n);
  }
}

BOOST_AUTO_TEST_CASE(negatives_are_never_positives_of_their_user) {
  const RecommendationSplit s = small_split();
  const UserPositives known(s.num_users, s.num_items, s.user.data(), s.item.data(), s.rows());
  for (int epoch = 0; epoch < 5; ++epoch) {
    RecommendationBatches b(s, 0, 1, 10, 4, 11);
    for (const Sample& x : epoch_samples(b, epoch)) {
      const bool is_positive = known.contains(std::get<0>(x), std::get<1>(x));
      BOOST_REQUIRE_EQUAL(is_positive, std::get<2>(x) == 1.0f);
    }
  }
}

BOOST_AUTO_TEST_CASE(independent_of_world_size) {
  const RecommendationSplit s = small_split();
  for (int epoch : {0, 3}) {
    const std::multiset<Sample> one = all_ranks(s, 1, 10, epoch, 9);
    BOOST_CHECK(one == all_ranks(s, 2, 10, epoch, 9));
    BOOST_CHECK(one == all_ranks(s, 3, 10, epoch, 9));
    BOOST_CHECK(one == all_ranks(s, 1, 5, epoch, 9));  // nor of the batch size
  }
  // The permuted order too: rank r's samples are positions [r * 150, (r + 1) * 150) at world 1.
  RecommendationBatches whole(s, 0, 1, 10, 4, 9), second(s, 1, 2, 10, 4, 9);
  const std::vector<Sample> w = epoch_samples(whole, 2), r1 = epoch_samples(second, 2);
  BOOST_CHECK(std::vector<Sample>(w.begin() + 150, w.end()) == r1);
}

BOOST_AUTO_TEST_CASE(epochs_draw_fresh_negatives_and_shuffle) {
  const RecommendationSplit s = small_split();
  RecommendationBatches b(s, 0, 1, 10, 4, 3);
  const std::vector<Sample> e0 = epoch_samples(b, 0), e1 = epoch_samples(b, 1);
  std::multiset<Sample> n0, n1;
  for (const Sample& x : e0)
    if (std::get<2>(x) == 0.0f) n0.insert(x);
  for (const Sample& x : e1)
    if (std::get<2>(x) == 0.0f) n1.insert(x);
  BOOST_CHECK(n0 != n1);
  BOOST_CHECK(e0 != e1);
  // Sample ids: not the identity order, and another epoch orders them otherwise.
  int64_t in_place = 0, same_as_next_epoch = 0;
  for (int64_t i = 0; i < 300; ++i) {
    in_place += b.sample_id(0, i) == i;
    same_as_next_epoch += b.sample_id(0, i) == b.sample_id(1, i);
  }
  BOOST_CHECK_LT(in_place, 10);
  BOOST_CHECK_LT(same_as_next_epoch, 10);
  // Without shuffle the ids run in order; the negatives are still drawn per epoch.
  RecommendationBatches plain(s, 1, 2, 10, 4, 3, /*shuffle=*/false);
  for (int64_t i = 0; i < plain.samples_per_epoch(); ++i) BOOST_REQUIRE_EQUAL(plain.sample_id(4, i), 150 + i);
  const std::vector<Sample> p = epoch_samples(plain, 0);
  BOOST_CHECK_EQUAL(std::get<0>(p[0]), s.user[30]);  // sample 150 is positive 30
  BOOST_CHECK_EQUAL(std::get<1>(p[0]), s.item[30]);
  BOOST_CHECK_EQUAL(std::get<2>(p[0]), 1.0f);
  BOOST_CHECK_EQUAL(std::get<2>(p[1]), 0.0f);
}

BOOST_AUTO_TEST_CASE(resume_at_a_step_and_determinism) {
  const RecommendationSplit s = small_split();
  RecommendationBatches a(s, 1, 2, 10, 4, 21), b(s, 1, 2, 10, 4, 21);
  const std::vector<Sample> full = epoch_samples(a, 4);
  BOOST_CHECK(full == epoch_samples(b, 4));  // two instances agree
  BOOST_CHECK(full == epoch_samples(a, 4));  // and a repeated epoch too
  for (int64_t first : {1, 7, 14, 15}) {
    RecommendationBatches resumed(s, 1, 2, 10, 4, 21);
    epoch_samples(resumed, 0);  // some other epoch before, as a resumed run might have had
    const std::vector<Sample> tail = epoch_samples(resumed, 4, first);
    BOOST_CHECK(std::vector<Sample>(full.begin() + first * 10, full.end()) == tail);
  }
  RecommendationBatches other_seed(s, 1, 2, 10, 4, 22);
  BOOST_CHECK(full != epoch_samples(other_seed, 4));
}

BOOST_AUTO_TEST_CASE(batches_across_preparation_windows) {
  // 1M positives: 5M samples, more than one window of prepared batches (4M samples), so steps on
  // both sides of a window's border and a resume inside the second window are covered.
  RecommendationSplit s;
  s.dir = "memory/train";
  s.num_users = 1000;
  s.num_items = 5000;
  for (int32_t u = 0; u < 1000; ++u)
    for (int32_t j = 0; j < 1000; ++j) {
      s.user.push_back(u);
      s.item.push_back((7 * j + u) % 5000);
    }
  RecommendationBatches b(s, 0, 1, 1000, 4, 13);
  BOOST_REQUIRE_EQUAL(b.steps_per_epoch(), 5000);
  const std::vector<Sample> full = epoch_samples(b, 1);
  BOOST_REQUIRE_EQUAL(full.size(), 5000000u);
  int64_t positives = 0;
  for (const Sample& x : full) positives += std::get<2>(x) == 1.0f;
  BOOST_CHECK_EQUAL(positives, 1000000);
  for (int64_t first : {4193, 4194, 4195}) {
    const std::vector<Sample> tail = epoch_samples(b, 1, first);
    BOOST_CHECK_MESSAGE(std::vector<Sample>(full.begin() + first * 1000, full.end()) == tail, "from step " << first);
  }
}

BOOST_AUTO_TEST_CASE(errors_are_clear) {
  const RecommendationSplit s = small_split();
  check_throws([&] { RecommendationBatches(s, 0, 8, 64); }, {"300 samples", "60 positives", "8 ranks x batch 64"});
  check_throws([&] { RecommendationBatches(s, 2, 2, 10); }, {"rank 2", "world of 2"});
  check_throws([&] { RecommendationBatches(s, 0, 1, 0); }, {"batch size"});
  check_throws([&] { RecommendationBatches(s, 0, 1, 10, 0); }, {"at least 1"});
  RecommendationBatches b(s, 0, 1, 10);
  check_throws([&] { b.start_epoch(0, 31); }, {"first step 31", "30 steps"});
  RecommendationSplit eval = s;
  eval.negatives_per_user = 1;
  eval.negatives.assign(eval.user.size(), 0);
  check_throws([&] { RecommendationBatches(eval, 0, 1, 10); }, {"memory/train", "evaluation split"});
  RecommendationSplit empty = s;
  empty.user.clear();
  empty.item.clear();
  check_throws([&] { RecommendationBatches(empty, 0, 1, 10); }, {"no training positives"});
  Tensor u, i, l;
  BOOST_CHECK(!b.next(u, i, l));  // before the first start_epoch
}

BOOST_AUTO_TEST_SUITE_END()
