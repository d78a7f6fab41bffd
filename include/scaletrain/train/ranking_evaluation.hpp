// NCF's evaluation (He et al. 2017; MLPerf v0.5 NCF reference): leave-one-out ranking. Every user
// has one held-out positive and K negatives (K = 999 for ml-20m); the model scores the 1 + K items,
// and the held-out item's rank among them gives HR@k (is it in the top k?) and NDCG@k
// (1 / log2(rank + 2) when it is, rank 0-based). Both are averaged over all users.
//
// Ties, as the reference: ncf.py's eval_one (mlcommons/training, recommendation/pytorch/ncf.py)
// puts the held-out item after the user's negatives and takes heapq.nlargest(K, ...) of the
// sigmoid outputs, which keeps equal scores in input order, so a negative that scores the same
// as the held-out item ranks above it (the later reference's val_epoch reproduces this order
// with a stable torch.topk). Hence rank = number of negatives whose score is >= the held-out
// item's. Scores are the model's probabilities, sigmoid(logit) in f32, as the reference ranks
// model(..., sigmoid=True): a tie of two saturated probabilities counts against the held-out item
// there, so it does here.
#pragma once

#include <cstdint>
#include <vector>

#include "scaletrain/backend/context.hpp"
#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/data/recommendation.hpp"
#include "scaletrain/models/neumf.hpp"

namespace scaletrain::train {

// NCF's default cut-off: HR@10 (MLPerf's NCF target is HR@10 = 0.635 on ml-20m).
constexpr int kDefaultRankingCutoff = 10;

// One user's outcome.
struct UserRanking {
  int64_t rank = 0;   // negatives ranked above the held-out item (score >= its score)
  bool hit = false;   // rank < k
  double ndcg = 0.0;  // 1 / log2(rank + 2) when hit, else 0
};

// heldout_score: the held-out item's score; negative_scores: its count negatives' scores; k >= 1.
UserRanking rank_heldout_item(float heldout_score, const float* negative_scores, int64_t count, int k);

struct RankingResult {
  int64_t users = 0, hits = 0;
  double ndcg_sum = 0.0;
  double hit_rate() const { return users ? static_cast<double>(hits) / users : 0.0; }
  double ndcg() const { return users ? ndcg_sum / users : 0.0; }
};

// The users (rows of an evaluation split) a rank scores: whole chunks of users_per_batch
// consecutive users, the chunks dealt out in contiguous runs of floor(C / P) or floor(C / P) + 1
// (rank r: chunks [floor(r C / P), floor((r + 1) C / P)), C = ceil(rows / users_per_batch)).
struct UserSlice {
  int64_t begin = 0, end = 0;  // rows [begin, end)
};
UserSlice ranking_user_slice(int64_t rows, int64_t users_per_batch, int rank, int size);

// NeuMF's logits (N) f32 on the host for (user, item) pairs users, items (N) i32 on the host: the
// pairs cross to the context's device (into device_users and device_items, kept between calls)
// and the logits come back. How the evaluation scores its pairs, and scaletrain predict a file's.
// The result may be the model's own buffer, overwritten by its next forward.
Tensor score_pairs(Context& ctx, models::NeuMF& model, const Tensor& users, const Tensor& items, Tensor& device_users,
                   Tensor& device_items);

// Collective. val: an evaluation split (throws otherwise). Each rank scores its ranking_user_slice,
// one chunk of users_per_batch users, (1 + K) items each, per model.forward; the last chunk of the
// split is padded to the full size with copies of its last user (scored and dropped), so that
// every forward has the same shape and every user is scored in the same forward, at the same
// place, whatever the number of ranks: on one machine the scores, hits and NDCG are bitwise the
// same on 1 rank or 80 (oneDNN picks its kernels by shape; another users_per_batch may round
// differently). The counts are all-reduced, so every rank returns the same result. scores
// (optional): this rank's scores, row-major [its users, 1 + K], column 0 the held-out item and
// column 1 + j its negative j.
RankingResult evaluate_ranking(const comm::Communicator& comm, Context& ctx, models::NeuMF& model,
                               const data::RecommendationSplit& val, int64_t users_per_batch,
                               int k = kDefaultRankingCutoff, std::vector<float>* scores = nullptr);

}  // namespace scaletrain::train
