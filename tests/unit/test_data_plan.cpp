// The epoch plan (plan.hpp) checked serially over every rank: coverage, equal counts, seeding,
// independence of the global order from the number of ranks, pad_last, shard mode.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <map>
#include <numeric>
#include <set>

#include "scaletrain/core/error.hpp"
#include "scaletrain/data/loader.hpp"
#include "scaletrain/data/plan.hpp"

using namespace scaletrain;
using data::LoaderOptions;
using data::plan_epoch;

namespace {
const std::vector<int64_t> kShards{300, 5, 417, 281};  // N = 1003, one shard smaller than a batch
constexpr int64_t kTotal = 1003;

LoaderOptions opts(int64_t batch, bool shuffle = true, const std::string& mode = "global") {
  LoaderOptions o;
  o.batch_size = batch;
  o.shuffle = shuffle;
  o.shuffle_mode = mode;
  o.seed = 7;
  return o;
}

// Every rank's plan, concatenated in rank order.
std::vector<std::vector<int64_t>> all_ranks(const std::vector<int64_t>& shards, int p, const LoaderOptions& o,
                                            int epoch) {
  std::vector<std::vector<int64_t>> out;
  for (int r = 0; r < p; ++r) out.push_back(plan_epoch(shards, r, p, o, epoch));
  return out;
}

// The whole epoch order: one rank, every sample once.
std::vector<int64_t> full_order(const std::vector<int64_t>& shards, LoaderOptions o, int epoch) {
  o.drop_last = false;
  o.pad_last = false;
  o.batch_size = 1;
  return plan_epoch(shards, 0, 1, o, epoch);
}

bool is_permutation_of_all(std::vector<int64_t> v, int64_t n) {
  std::sort(v.begin(), v.end());
  for (int64_t i = 0; i < n; ++i)
    if (i >= static_cast<int64_t>(v.size()) || v[i] != i) return false;
  return static_cast<int64_t>(v.size()) == n;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(data_plan)

BOOST_AUTO_TEST_CASE(global_drop_last_slices_one_permutation) {
  for (int64_t batch : {int64_t(1), int64_t(7), int64_t(25)})
    for (int p : {1, 2, 3, 4, 8}) {
      const LoaderOptions o = opts(batch);
      const std::vector<int64_t> full = full_order(kShards, o, 3);
      BOOST_TEST(is_permutation_of_all(full, kTotal));
      const int64_t per = kTotal / p, count = per / batch * batch;
      std::set<int64_t> seen;
      for (int r = 0; r < p; ++r) {
        const auto ids = plan_epoch(kShards, r, p, o, 3);
        BOOST_TEST(static_cast<int64_t>(ids.size()) == count);
        BOOST_TEST(data::planned_samples(kTotal, r, p, o) == count);
        // Independent of P: rank r's slice of the one permutation.
        BOOST_TEST(std::equal(ids.begin(), ids.end(), full.begin() + r * per));
        seen.insert(ids.begin(), ids.end());
      }
      BOOST_TEST(static_cast<int64_t>(seen.size()) == p * count);  // no sample twice
    }
}

BOOST_AUTO_TEST_CASE(global_order_is_seeded_by_seed_and_epoch) {
  LoaderOptions o = opts(8);
  const auto a = plan_epoch(kShards, 1, 3, o, 0);
  BOOST_TEST(a == plan_epoch(kShards, 1, 3, o, 0));
  BOOST_TEST(a != plan_epoch(kShards, 1, 3, o, 1));
  o.seed = 8;
  BOOST_TEST(a != plan_epoch(kShards, 1, 3, o, 0));
  // The shard layout does not matter in global mode: rank_samples sees one shard.
  BOOST_TEST(plan_epoch(kShards, 2, 3, o, 5) == data::rank_samples(kTotal, 2, 3, o, 5));
  BOOST_TEST(plan_epoch(kShards, 2, 3, o, 5) == plan_epoch({kTotal}, 2, 3, o, 5));
}

BOOST_AUTO_TEST_CASE(no_shuffle_keeps_file_order) {
  for (const char* mode : {"global", "shard"}) {
    const LoaderOptions o = opts(10, false, mode);
    const auto ids = plan_epoch(kShards, 1, 4, o, 2);
    BOOST_TEST(ids.size() == 250u);  // floor(1003 / 4) = 250, 25 batches
    for (std::size_t i = 0; i < ids.size(); ++i) BOOST_TEST(ids[i] == 250 + static_cast<int64_t>(i));
  }
}

BOOST_AUTO_TEST_CASE(evaluation_sees_every_sample_once) {
  for (const char* mode : {"global", "shard"})
    for (int p : {1, 3, 4, 7}) {
      LoaderOptions o = opts(16, true, mode);
      o.drop_last = false;
      std::vector<int64_t> all;
      for (const auto& ids : all_ranks(kShards, p, o, 1)) {
        BOOST_TEST((int64_t(ids.size()) == kTotal / p || int64_t(ids.size()) == kTotal / p + 1));
        all.insert(all.end(), ids.begin(), ids.end());
      }
      BOOST_TEST(is_permutation_of_all(all, kTotal));
    }
}

BOOST_AUTO_TEST_CASE(pad_last_repeats_the_start_of_the_order) {
  for (const char* mode : {"global", "shard"})
    for (int64_t batch : {int64_t(1), int64_t(16), int64_t(300)})
      for (int p : {1, 2, 3, 4, 8}) {
        LoaderOptions o = opts(batch, true, mode);
        o.pad_last = true;
        o.shuffle_buffer = 1;  // shard mode: the slice order itself, for the positional check below
        const int64_t per = (kTotal + p - 1) / p, m = (per + batch - 1) / batch * batch;
        const std::vector<int64_t> full = full_order(kShards, o, 4);
        std::map<int64_t, int> times;
        for (int r = 0; r < p; ++r) {
          const auto ids = plan_epoch(kShards, r, p, o, 4);
          BOOST_TEST(static_cast<int64_t>(ids.size()) == m);
          BOOST_TEST(data::planned_samples(kTotal, r, p, o) == m);
          for (int64_t i = 0; i < m; ++i) {
            BOOST_TEST(ids[i] == full[(r * m + i) % kTotal]);  // the order extended cyclically
            ++times[ids[i]];
          }
        }
        BOOST_TEST(static_cast<int64_t>(times.size()) == kTotal);  // every sample at least once
        // Position k >= N repeats position k - N: the first P*M - N samples of the order twice
        // (three times only when P*M > 2N).
        for (int64_t k = 0; k < kTotal; ++k) {
          const int64_t expected = (p * m - k + kTotal - 1) / kTotal;
          BOOST_TEST(times[full[k]] == expected);
        }
      }
}

BOOST_AUTO_TEST_CASE(shard_mode_deals_permuted_whole_shards) {
  LoaderOptions o = opts(8, true, "shard");
  o.shuffle_buffer = 1;  // no buffer shuffle: the dealt order itself
  // The epoch order is the shards, whole and in file order inside, in a permuted order.
  std::vector<std::vector<int64_t>> orders;
  for (int epoch = 0; epoch < 6; ++epoch) {
    const std::vector<int64_t> full = full_order(kShards, o, epoch);
    BOOST_TEST(is_permutation_of_all(full, kTotal));
    std::vector<int64_t> shard_order;
    std::size_t at = 0;
    while (at < full.size()) {
      int64_t first = 0, s = 0;
      while (first + kShards[s] <= full[at]) first += kShards[s++];
      BOOST_TEST(full[at] == first);  // a shard starts at its first row
      for (int64_t i = 0; i < kShards[s]; ++i) BOOST_TEST(full[at + i] == first + i);
      at += kShards[s];
      shard_order.push_back(s);
    }
    BOOST_TEST(shard_order.size() == kShards.size());
    orders.push_back(shard_order);
  }
  BOOST_TEST(std::set<std::vector<int64_t>>(orders.begin(), orders.end()).size() > 2u);  // differs per epoch
  // Ranks take contiguous slices of it, with equal counts.
  for (int p : {2, 3, 4}) {
    const std::vector<int64_t> full = full_order(kShards, o, 2);
    const int64_t per = kTotal / p, count = per / 8 * 8;
    for (int r = 0; r < p; ++r) {
      const auto ids = plan_epoch(kShards, r, p, o, 2);
      BOOST_TEST(static_cast<int64_t>(ids.size()) == count);
      BOOST_TEST(std::equal(ids.begin(), ids.end(), full.begin() + r * per));
    }
  }
}

BOOST_AUTO_TEST_CASE(shard_mode_buffer_shuffles_within_the_slice) {
  LoaderOptions o = opts(8, true, "shard");
  for (int64_t buffer : {int64_t(1), int64_t(16), int64_t(100000)}) {
    o.shuffle_buffer = buffer;
    LoaderOptions plain = o;
    plain.shuffle_buffer = 1;
    for (int p : {1, 2, 4}) {
      std::set<int64_t> seen;
      for (int r = 0; r < p; ++r) {
        const auto ids = plan_epoch(kShards, r, p, o, 1);
        auto dealt = plan_epoch(kShards, r, p, plain, 1);
        BOOST_TEST(ids == plan_epoch(kShards, r, p, o, 1));  // reproducible
        // The same samples as the unshuffled slice, each within `buffer` - 1 places earlier
        // than its place in the slice (a sample enters the buffer at its slice position).
        std::map<int64_t, int64_t> place;
        for (std::size_t i = 0; i < dealt.size(); ++i) place[dealt[i]] = static_cast<int64_t>(i);
        for (std::size_t i = 0; i < ids.size(); ++i) {
          BOOST_TEST(place.count(ids[i]) == 1u);
          BOOST_TEST(static_cast<int64_t>(i) >= place[ids[i]] - (buffer - 1));
        }
        if (buffer == 1) BOOST_TEST(ids == dealt);
        if (buffer > 1) BOOST_TEST(ids != dealt);
        seen.insert(ids.begin(), ids.end());
        BOOST_TEST(ids.size() == dealt.size());
      }
      BOOST_TEST(static_cast<int64_t>(seen.size()) == p * (kTotal / p / 8 * 8));  // no sample twice
    }
  }
}

BOOST_AUTO_TEST_CASE(bad_options_are_named) {
  LoaderOptions o = opts(8, true, "bogus");
  BOOST_CHECK_THROW(plan_epoch(kShards, 0, 1, o, 0), Error);
  o = opts(8, true, "shard");
  o.shuffle_buffer = 0;
  BOOST_CHECK_THROW(plan_epoch(kShards, 0, 1, o, 0), Error);
  o = opts(0);
  BOOST_CHECK_THROW(plan_epoch(kShards, 0, 1, o, 0), Error);
  BOOST_CHECK_THROW(plan_epoch(kShards, 2, 2, opts(8), 0), Error);
}

BOOST_AUTO_TEST_SUITE_END()
