// NCF's ranking evaluation under MPI (train::evaluate_ranking): on a small NeuMF and an in-memory
// evaluation split, every rank count gives the hits and NDCG of a serial computation written here
// from model.forward (a stable sort of the 1 + K probabilities, the held-out item last, as the
// reference's heapq.nlargest), one user per forward: the scores within fp32 rounding (other GEMM
// shapes round differently), the hits exactly but for users whose held-out item ties a negative
// within that rounding. With the same users per batch, every rank count gives bitwise the same
// scores, hits and NDCG as one rank alone (a communicator of one): each rank's scores are its
// slice of whole chunks, and every chunk is scored in a forward of the same shape.
// ST_MPI_RANKS: 1 2 3
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <numeric>

#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/rng.hpp"
#include "scaletrain/models/neumf.hpp"
#include "scaletrain/train/ranking_evaluation.hpp"

using namespace scaletrain;

namespace {

constexpr int64_t kUsers = 37, kItems = 60, kNegatives = 20;

// Held-out item (7u + 3) mod 60 and 20 distinct negatives (one random start, stride 1, skipping
// the held-out item).
data::RecommendationSplit eval_split() {
  data::RecommendationSplit s;
  s.dir = "memory/val";
  s.num_users = kUsers;
  s.num_items = kItems;
  s.negatives_per_user = kNegatives;
  Rng rng(5);
  for (int32_t u = 0; u < kUsers; ++u) {
    const int32_t held = (7 * u + 3) % kItems;
    s.user.push_back(u);
    s.item.push_back(held);
    int32_t next = static_cast<int32_t>(rng.below(kItems));
    for (int j = 0; j < kNegatives; ++j, next = (next + 1) % kItems) {
      if (next == held) next = (next + 1) % kItems;
      s.negatives.push_back(next);
    }
  }
  return s;
}

// A NeuMF whose embeddings are 30 times the reference's initial scale, so that scores spread.
void make_model(models::NeuMF& model) {
  model.initialize(17);
  nn::ParameterSet& ps = model.params();
  for (int i = 0; i < ps.num_parameters(); ++i) {
    if (ps.parameter_info(i).name.find("embed") == std::string::npos) continue;
    float* v = ps.value(i).data<float>();
    for (int64_t j = 0; j < ps.value(i).numel(); ++j) v[j] *= 30.0f;
  }
}

struct Serial {
  int64_t hits = 0;
  double ndcg_sum = 0.0;
  std::vector<float> scores;  // [users, 1 + K]
  int64_t near_ties = 0;      // users whose held-out score is within kTieRelative of a negative's
};

// Probabilities of other GEMM shapes differ by a few float32 ulps: a user whose held-out item and
// a negative score within this of each other may rank either way.
constexpr double kTieRelative = 1e-5;

Serial serial_ranking(Context& ctx, models::NeuMF& model, const data::RecommendationSplit& val, int k) {
  Serial out;
  const int64_t per_user = 1 + kNegatives;
  for (int64_t row = 0; row < val.rows(); ++row) {
    Tensor users = Tensor::empty({per_user}, DType::i32), items = Tensor::empty({per_user}, DType::i32);
    for (int64_t j = 0; j < per_user; ++j) {
      users.data<int32_t>()[j] = val.user[row];
      items.data<int32_t>()[j] = j == 0 ? val.item[row] : val.negatives[row * kNegatives + j - 1];
    }
    const Tensor logits = model.forward(ctx, users, items);
    std::vector<float> p(per_user);
    for (int64_t j = 0; j < per_user; ++j) p[j] = 1.0f / (1.0f + std::exp(-logits.data<float>()[j]));
    out.scores.insert(out.scores.end(), p.begin(), p.end());
    // The reference's order: negatives, then the held-out item; a stable sort by score, descending.
    std::vector<int64_t> order(per_user);
    for (int64_t j = 0; j < kNegatives; ++j) order[j] = j + 1;
    order[kNegatives] = 0;
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
    const int64_t rank = std::find(order.begin(), order.end(), 0) - order.begin();
    bool tie = false;
    for (int64_t j = 1; j < per_user; ++j) tie = tie || std::fabs(p[j] - p[0]) <= kTieRelative * std::fabs(p[0]);
    out.near_ties += tie;
    if (rank < k) {
      ++out.hits;
      out.ndcg_sum += std::log(2.0) / std::log(rank + 2.0);
    }
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(ranking_evaluation)

BOOST_AUTO_TEST_CASE(matches_a_serial_computation_at_every_rank_count) {
  const comm::Communicator world = comm::Communicator::world();
  const comm::Communicator alone = world.split(world.rank(), 0);
  const data::RecommendationSplit val = eval_split();
  models::NeuMF model(kUsers, kItems, 8, {16, 8});
  make_model(model);
  Context ctx;
  for (int k : {1, 5, 10}) {
    const Serial serial = serial_ranking(ctx, model, val, k);
    BOOST_TEST_MESSAGE("k " << k << ": serial hits " << serial.hits << " of " << kUsers);
    BOOST_CHECK(serial.hits > 0 && serial.hits < kUsers);  // the test can tell hits from misses
    for (int64_t users_per_batch : {1, 4, 64}) {
      std::vector<float> mine;
      const train::RankingResult r = train::evaluate_ranking(world, ctx, model, val, users_per_batch, k, &mine);
      BOOST_CHECK_EQUAL(r.users, kUsers);
      // Against the serial forwards (other shapes): hits but for near ties, NDCG to match.
      BOOST_CHECK_LE(std::abs(r.hits - serial.hits), serial.near_ties);
      if (serial.near_ties == 0) {
        BOOST_CHECK_CLOSE(r.ndcg_sum, serial.ndcg_sum, 1e-9);
        BOOST_CHECK_CLOSE(r.hit_rate(), static_cast<double>(serial.hits) / kUsers, 1e-12);
      }
      const train::UserSlice slice = train::ranking_user_slice(kUsers, users_per_batch, world.rank(), world.size());
      BOOST_REQUIRE_EQUAL(static_cast<int64_t>(mine.size()), (slice.end - slice.begin) * (1 + kNegatives));
      for (size_t i = 0; i < mine.size(); ++i)
        BOOST_REQUIRE_CLOSE(mine[i], serial.scores[slice.begin * (1 + kNegatives) + i], 1e-4);
      // One rank alone, the same users per batch: the same forwards, bitwise the same results.
      std::vector<float> all;
      const train::RankingResult one = train::evaluate_ranking(alone, ctx, model, val, users_per_batch, k, &all);
      BOOST_CHECK_EQUAL(one.hits, r.hits);
      BOOST_CHECK_EQUAL(one.ndcg_sum, r.ndcg_sum);
      BOOST_REQUIRE_EQUAL(all.size(), static_cast<size_t>(kUsers * (1 + kNegatives)));
      BOOST_CHECK(std::equal(mine.begin(), mine.end(), all.begin() + slice.begin * (1 + kNegatives)));
    }
  }
}

BOOST_AUTO_TEST_CASE(refuses_a_training_split) {
  const comm::Communicator world = comm::Communicator::world();
  data::RecommendationSplit train = eval_split();
  train.negatives_per_user = 0;
  train.negatives.clear();
  models::NeuMF model(kUsers, kItems, 8, {16, 8});
  Context ctx;
  BOOST_CHECK_THROW(train::evaluate_ranking(world, ctx, model, train, 8), Error);
}

BOOST_AUTO_TEST_SUITE_END()
