// Tests for the translation task's token-budget batches (data::TranslationBatches): the
// reference's length buckets, the token budget of every padded batch, every pair once per epoch
// over the ranks (but the fewer-than-P batches left over), the same steps on every rank and in
// every epoch, the shifted target input, resuming at a step, shuffles that depend on (seed, epoch)
// alone, and the error for a budget a pair does not fit.
#include <boost/test/unit_test.hpp>
#include <map>
#include <set>

#include "scaletrain/core/rng.hpp"
#include "scaletrain/data/translation_batches.hpp"
#include "support/gradcheck.hpp"

using namespace scaletrain;
using namespace scaletrain::data;
using scaletrain::test::check_throws;

namespace {

// 300 pairs: source i has 2 + (7i mod 29) tokens, target 2 + (11i mod 37); ids encode the pair
// (2 + i mod 5000 everywhere but the end of sentence), so a batch row names its pair.
SentencePairs some_pairs(int64_t n = 300) {
  SentencePairs p;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int32_t> s(static_cast<std::size_t>(2 + (7 * i) % 29), static_cast<int32_t>(2 + i));
    std::vector<int32_t> t(static_cast<std::size_t>(2 + (11 * i) % 37), static_cast<int32_t>(2 + i));
    s.back() = t.back() = 1;
    p.add(s, t);
  }
  return p;
}

struct Step {
  std::vector<int64_t> pairs;  // in row order
  TranslationStepTotals totals;
};

// Every step of one rank in an epoch, checking each batch's layout against its pairs.
std::vector<Step> epoch_of(TranslationBatches& b, const SentencePairs& p, int epoch, int64_t first_step,
                           int64_t batch_tokens) {
  b.start_epoch(epoch, first_step);
  std::vector<Step> steps;
  Tensor src, len, tin, tgt;
  Step s;
  while (b.next(src, len, tin, tgt, s.totals)) {
    s.pairs.clear();
    const int64_t n = src.dim(0), ls = src.dim(1), lt = tgt.dim(1);
    BOOST_TEST(n * ls <= batch_tokens);
    BOOST_TEST(n * lt <= batch_tokens);
    for (int64_t k = 0; k < n; ++k) {
      const int64_t i = src.data<int32_t>()[k * ls] - 2;
      s.pairs.push_back(i);
      BOOST_TEST(len.data<int32_t>()[k] == p.source_length(i));
      for (int64_t t = 0; t < ls; ++t)
        BOOST_TEST(src.data<int32_t>()[k * ls + t] == (t < p.source_length(i) ? p.source(i)[t] : 0));
      for (int64_t t = 0; t < lt; ++t) {
        BOOST_TEST(tgt.data<int32_t>()[k * lt + t] == (t < p.target_length(i) ? p.target(i)[t] : 0));
        BOOST_TEST(tin.data<int32_t>()[k * lt + t] ==
                   (t == 0 ? 0 : (t - 1 < p.target_length(i) ? p.target(i)[t - 1] : 0)));
      }
    }
    steps.push_back(s);
  }
  return steps;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(translation_batches)

BOOST_AUTO_TEST_CASE(reference_length_buckets) {
  // utils/dataset.py's _create_min_max_boundaries(256): boundaries from 8 by max(x + 1, int(1.1 x)).
  const std::vector<int64_t> want = {8,  9,  10, 11,  12,  13,  14,  15,  16,  17,  18,  19,  20,  22,
                                     24, 26, 28, 30,  33,  36,  39,  42,  46,  50,  55,  60,  66,  72,
                                     79, 86, 94, 103, 113, 124, 136, 149, 163, 179, 196, 215, 236, 257};
  BOOST_TEST(length_bucket_bounds(256) == want, boost::test_tools::per_element());
  BOOST_TEST(length_bucket_bounds(8) == (std::vector<int64_t>{9}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(every_pair_once_and_equal_steps) {
  const SentencePairs p = some_pairs();
  const int64_t budget = 200;
  for (int world : {1, 2, 3}) {
    std::vector<std::vector<Step>> ranks;
    for (int r = 0; r < world; ++r) {
      TranslationBatches b(p, 38, r, world, budget, 5, true);
      ranks.push_back(epoch_of(b, p, 0, 0, budget));
      BOOST_TEST(static_cast<int64_t>(ranks.back().size()) == b.steps_per_epoch());
      BOOST_TEST(b.steps_per_epoch() == b.batches_per_epoch() / world);
    }
    std::multiset<int64_t> seen;
    for (std::size_t s = 0; s < ranks[0].size(); ++s) {
      TranslationStepTotals sum;
      for (int r = 0; r < world; ++r) {
        for (int64_t i : ranks[r][s].pairs) {
          seen.insert(i);
          ++sum.sentences;
          sum.source_tokens += p.source_length(i);
          sum.target_tokens += p.target_length(i);
        }
        BOOST_TEST(ranks[r][s].totals.target_tokens == ranks[0][s].totals.target_tokens);
      }
      BOOST_TEST(ranks[0][s].totals.sentences == sum.sentences);
      BOOST_TEST(ranks[0][s].totals.source_tokens == sum.source_tokens);
      BOOST_TEST(ranks[0][s].totals.target_tokens == sum.target_tokens);
    }
    // No pair twice; the ones missing are the leftover batches' (fewer than `world` batches).
    BOOST_TEST(std::set<int64_t>(seen.begin(), seen.end()).size() == seen.size());
    if (world == 1) BOOST_TEST(seen.size() == 300u);
    BOOST_TEST(seen.size() >= 300u - static_cast<std::size_t>(world - 1) * 10);
  }
}

BOOST_AUTO_TEST_CASE(resume_and_shuffle) {
  const SentencePairs p = some_pairs();
  TranslationBatches b(p, 38, 1, 2, 300, 9, true);
  const std::vector<Step> e0 = epoch_of(b, p, 0, 0, 300), e1 = epoch_of(b, p, 1, 0, 300);
  const std::vector<Step> again = epoch_of(b, p, 0, 0, 300), resumed = epoch_of(b, p, 0, 3, 300);
  BOOST_TEST(e0.size() == e1.size());  // the same steps in every epoch
  BOOST_REQUIRE(resumed.size() + 3 == e0.size());
  bool epochs_differ = false;
  for (std::size_t s = 0; s < e0.size(); ++s) {
    BOOST_TEST(again[s].pairs == e0[s].pairs, boost::test_tools::per_element());
    if (s >= 3) BOOST_TEST(resumed[s - 3].pairs == e0[s].pairs, boost::test_tools::per_element());
    epochs_differ |= e0[s].pairs != e1[s].pairs;
  }
  BOOST_TEST(epochs_differ);
  TranslationBatches other_seed(p, 38, 1, 2, 300, 10, true);
  BOOST_TEST(epoch_of(other_seed, p, 0, 0, 300)[0].pairs != e0[0].pairs);
  // Without shuffling: file order within each bucket.
  TranslationBatches plain(p, 38, 0, 1, 300, 9, false);
  for (const Step& s : epoch_of(plain, p, 0, 0, 300)) BOOST_TEST(std::is_sorted(s.pairs.begin(), s.pairs.end()));
}

BOOST_AUTO_TEST_CASE(budget_too_small) {
  const SentencePairs p = some_pairs();
  // The longest pair has 38 tokens: its bucket ends at 39 (max_length 38 + 1).
  check_throws([&] { TranslationBatches(p, 38, 0, 1, 38, 0, true); },
               {"--batch-tokens 38 is too small", "give at least 39"});
  TranslationBatches fits(p, 38, 0, 1, 39, 0, true);
  BOOST_TEST(fits.steps_per_epoch() > 0);
}

BOOST_AUTO_TEST_SUITE_END()
