// MovieLens ratings and a synthetic source for the recommendation task (docs/dataset-format.md, "convert movielens"):
// reading ml-20m's ratings.csv or ml-1m's ratings.dat, dense ids, and NCF's leave-one-out split
// (each user's latest interaction held out and ranked against sampled negatives; He et al. 2017,
// MLPerf's NCF reference).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "scaletrain/data/recommendation.hpp"

namespace scaletrain::data {

// One rating: ids as in the file (original or dense), its timestamp, and its line in the file
// (1-based), which breaks timestamp ties: the later line counts as the later interaction.
struct Interaction {
  int64_t user = 0, item = 0, timestamp = 0, line = 0;
};

struct Ratings {
  std::string file;  // the file read
  std::vector<Interaction> interactions;
};

// Reads DIR/ratings.csv (ml-20m/ml-25m: header `userId,movieId,rating,timestamp`) or, when there is
// none, DIR/ratings.dat (ml-1m: `UserID::MovieID::Rating::Timestamp`, no header). Throws naming
// DIR when neither exists, the file and line for a malformed line, and the file when it holds no
// rating.
Ratings read_movielens_ratings(const std::string& dir);

// Renumbers users and items densely, each in increasing order of original id (so that the
// mapping is documented and independent of file order). Sets num_users and num_items.
std::vector<Interaction> remap_dense(const std::vector<Interaction>& ratings, int64_t& num_users, int64_t& num_items);

// NCF's leave-one-out split of dense interactions: a repeated (user, item) counts once (its
// latest interaction); each user's latest interaction (max timestamp, ties to the later line) is
// held out; the rest are the training positives, by user, then in time order. Every user needs an
// interaction (throws naming one that has none); a user with only one keeps it as its held-out
// item and has no training positive (counted in users_without_training). Evaluation negatives:
// eval_negatives distinct non-positives per user (sample_eval_negatives with `seed`, excluding
// the held-out and training positives).
RecommendationData leave_one_out(int64_t num_users, int64_t num_items, std::vector<Interaction> interactions,
                                 int64_t eval_negatives, uint64_t seed);

// A synthetic implicit-feedback dataset with planted structure, for tests and benchmarks: user u
// belongs to group u mod G and item i to group i mod G. Each user draws `positives_per_user`
// distinct items in order, each with probability kSyntheticInGroup from its group's items
// (popularity skewed: the group's j-th item of n with probability density ∝ 1/sqrt(j/n), as
// floor(n v^2) for v uniform), otherwise uniformly from all items; the last draw is held out
// (leave_one_out with draw order as time). A group-aware ranking therefore beats chance by far;
// the CLI test measures it. Depends only on the arguments (every rank builds the same data).
constexpr double kSyntheticInGroup = 0.9;
RecommendationData synthetic_recommendation(int64_t users, int64_t items, int64_t groups, int64_t positives_per_user,
                                            int64_t eval_negatives, uint64_t seed);

}  // namespace scaletrain::data
