// Tests for NCF's per-user ranking (train::rank_heldout_item): rank 0, k - 1, k, ties (which count
// against the held-out item, as in the MLPerf reference) and the NDCG values. evaluate_ranking
// itself is tested under MPI (tests/mpi/test_ranking_evaluation.cpp) and against numpy
// (tests/python/test_ranking_evaluation.py).
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <vector>

#include "scaletrain/core/error.hpp"
#include "scaletrain/train/ranking_evaluation.hpp"

using namespace scaletrain;
using namespace scaletrain::train;

BOOST_AUTO_TEST_SUITE(ranking_evaluation)

BOOST_AUTO_TEST_CASE(rank_zero_is_a_hit_with_ndcg_one) {
  const std::vector<float> negatives{0.1f, 0.2f, 0.3f};
  const UserRanking r = rank_heldout_item(0.9f, negatives.data(), 3, 10);
  BOOST_CHECK_EQUAL(r.rank, 0);
  BOOST_CHECK(r.hit);
  BOOST_CHECK_EQUAL(r.ndcg, 1.0);
  const UserRanking none = rank_heldout_item(0.5f, nullptr, 0, 1);  // no negatives: rank 0
  BOOST_CHECK(none.hit);
}

BOOST_AUTO_TEST_CASE(rank_k_minus_one_hits_and_rank_k_misses) {
  const int k = 10;
  std::vector<float> negatives(99, 0.0f);
  for (int j = 0; j < k - 1; ++j) negatives[j * 7] = 0.8f + 0.01f * j;  // 9 above, scattered
  UserRanking r = rank_heldout_item(0.5f, negatives.data(), 99, k);
  BOOST_CHECK_EQUAL(r.rank, k - 1);
  BOOST_CHECK(r.hit);
  BOOST_CHECK_CLOSE(r.ndcg, 1.0 / std::log2(11.0), 1e-12);
  negatives[98] = 0.6f;  // a tenth above
  r = rank_heldout_item(0.5f, negatives.data(), 99, k);
  BOOST_CHECK_EQUAL(r.rank, k);
  BOOST_CHECK(!r.hit);
  BOOST_CHECK_EQUAL(r.ndcg, 0.0);
  // The same list with k = 11: a hit at rank 10.
  r = rank_heldout_item(0.5f, negatives.data(), 99, k + 1);
  BOOST_CHECK(r.hit);
  BOOST_CHECK_CLOSE(r.ndcg, 1.0 / std::log2(12.0), 1e-12);
}

BOOST_AUTO_TEST_CASE(ties_rank_above_the_heldout_item) {
  // The reference's heapq.nlargest keeps input order among equal scores and the held-out item
  // comes last, so every tie counts as a negative ranked above it.
  const std::vector<float> negatives{0.5f, 0.1f, 0.5f, 0.7f};
  UserRanking r = rank_heldout_item(0.5f, negatives.data(), 4, 10);
  BOOST_CHECK_EQUAL(r.rank, 3);
  BOOST_CHECK_CLOSE(r.ndcg, 1.0 / std::log2(5.0), 1e-12);
  r = rank_heldout_item(0.5f, negatives.data(), 4, 3);  // rank 3 = k: a miss
  BOOST_CHECK(!r.hit);
  // All equal (an untrained model saturating, say): the held-out item is last.
  const std::vector<float> flat(999, 1.0f);
  r = rank_heldout_item(1.0f, flat.data(), 999, 10);
  BOOST_CHECK_EQUAL(r.rank, 999);
  BOOST_CHECK(!r.hit);
  // One ulp above every negative is a hit at rank 0.
  r = rank_heldout_item(std::nextafter(0.7f, 1.0f), negatives.data(), 4, 1);
  BOOST_CHECK_EQUAL(r.rank, 0);
  BOOST_CHECK(r.hit);
}

BOOST_AUTO_TEST_CASE(bad_cutoff_throws) {
  BOOST_CHECK_THROW(rank_heldout_item(0.5f, nullptr, 0, 0), Error);
  RankingResult empty;
  BOOST_CHECK_EQUAL(empty.hit_rate(), 0.0);
  RankingResult some{4, 1, 1.5};
  BOOST_CHECK_EQUAL(some.hit_rate(), 0.25);
  BOOST_CHECK_EQUAL(some.ndcg(), 0.375);
}

BOOST_AUTO_TEST_CASE(slices_are_whole_chunks_covering_every_user_once) {
  for (int64_t rows : {0, 1, 37, 64, 65}) {
    for (int64_t per_batch : {1, 4, 16, 100}) {
      for (int size : {1, 2, 3, 8}) {
        int64_t next = 0;
        for (int rank = 0; rank < size; ++rank) {
          const train::UserSlice s = train::ranking_user_slice(rows, per_batch, rank, size);
          BOOST_CHECK_EQUAL(s.begin, next);                      // contiguous, in rank order
          BOOST_CHECK(s.begin % per_batch == 0);                 // starts on a chunk boundary
          BOOST_CHECK(s.end == rows || s.end % per_batch == 0);  // ends on one, or at the split's end
          next = s.end;
        }
        BOOST_CHECK_EQUAL(next, rows);  // every user once
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
