// NCF's leave-one-out ranking evaluation (ranking_evaluation.hpp): users sharded over ranks,
// scored in batches, hits and NDCG all-reduced. Each batch is progress for the stall watchdog,
// as in evaluation.cpp.
#include "scaletrain/train/ranking_evaluation.hpp"

#include <algorithm>
#include <cmath>

#include "scaletrain/core/error.hpp"
#include "scaletrain/core/progress.hpp"

namespace scaletrain::train {

UserRanking rank_heldout_item(float heldout_score, const float* negative_scores, int64_t count, int k) {
  ST_CHECK(k >= 1, "ranking: the cut-off k must be at least 1, got " << k);
  UserRanking r;
  for (int64_t j = 0; j < count; ++j) r.rank += negative_scores[j] >= heldout_score;
  r.hit = r.rank < k;
  r.ndcg = r.hit ? 1.0 / std::log2(static_cast<double>(r.rank) + 2.0) : 0.0;
  return r;
}

RankingResult evaluate_ranking(const comm::Communicator& comm, Context& ctx, models::NeuMF& model,
                               const data::RecommendationSplit& val, int64_t users_per_batch, int k,
                               std::vector<float>* scores) {
  ST_CHECK(val.is_evaluation(),
           "ranking evaluation: " << val.dir << " is not an evaluation split (it has no negatives)");
  ST_CHECK(users_per_batch >= 1, "ranking evaluation: users per batch must be at least 1, got " << users_per_batch);
  ST_CHECK(k >= 1, "ranking evaluation: the cut-off k must be at least 1, got " << k);
  progress::enter("ranking evaluation");
  const int64_t rows = val.rows(), negatives = val.negatives_per_user, per_user = 1 + negatives;
  const int64_t begin = rows * comm.rank() / comm.size(), end = rows * (comm.rank() + 1) / comm.size();
  if (scores) scores->assign(static_cast<size_t>((end - begin) * per_user), 0.0f);

  const int64_t batch_users = std::min(users_per_batch, std::max<int64_t>(end - begin, 1));
  Tensor users = Tensor::empty({batch_users * per_user}, DType::i32);
  Tensor items = Tensor::empty({batch_users * per_user}, DType::i32);
  std::vector<float> probability;
  int64_t hits = 0;
  double ndcg_sum = 0.0;
  for (int64_t first = begin; first < end; first += batch_users) {
    const int64_t n = std::min(batch_users, end - first);
    int32_t* u = users.data<int32_t>();
    int32_t* it = items.data<int32_t>();
    for (int64_t r = 0; r < n; ++r) {
      const int64_t row = first + r;
      std::fill(u + r * per_user, u + (r + 1) * per_user, val.user[row]);
      it[r * per_user] = val.item[row];
      std::copy(val.negatives.begin() + row * negatives, val.negatives.begin() + (row + 1) * negatives,
                it + r * per_user + 1);
    }
    const Tensor batch_u = Tensor::view_of(users, 0, {n * per_user});
    const Tensor batch_i = Tensor::view_of(items, 0, {n * per_user});
    const Tensor logits = model.forward(ctx, batch_u, batch_i);
    const float* x = logits.data<float>();
    probability.resize(static_cast<size_t>(n * per_user));
    for (int64_t i = 0; i < n * per_user; ++i) probability[i] = 1.0f / (1.0f + std::exp(-x[i]));
    for (int64_t r = 0; r < n; ++r) {
      const float* p = probability.data() + r * per_user;
      const UserRanking result = rank_heldout_item(p[0], p + 1, negatives, k);
      hits += result.hit;
      ndcg_sum += result.ndcg;
    }
    if (scores) std::copy(probability.begin(), probability.end(), scores->begin() + (first - begin) * per_user);
    progress::tick();
  }
  progress::enter("ranking evaluation results", /*waiting=*/true);
  RankingResult result;
  result.users = comm.allreduce_sum(end - begin);
  result.hits = comm.allreduce_sum(hits);
  result.ndcg_sum = comm.allreduce_sum(ndcg_sum);
  return result;
}

}  // namespace scaletrain::train
