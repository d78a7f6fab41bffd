// NCF's leave-one-out ranking evaluation (ranking_evaluation.hpp): users sharded over ranks in
// whole chunks of one forward each, every forward the same shape, hits and NDCG all-reduced. Each
// batch is progress for the stall watchdog, as in evaluation.cpp.
#include "scaletrain/train/ranking_evaluation.hpp"

#include <algorithm>
#include <cmath>

#include "scaletrain/core/error.hpp"
#include "scaletrain/core/progress.hpp"
#include "scaletrain/ops/cast.hpp"
#include "train/model_input.hpp"

namespace scaletrain::train {

UserRanking rank_heldout_item(float heldout_score, const float* negative_scores, int64_t count, int k) {
  ST_CHECK(k >= 1, "ranking: the cut-off k must be at least 1, got " << k);
  UserRanking r;
  for (int64_t j = 0; j < count; ++j) r.rank += negative_scores[j] >= heldout_score;
  r.hit = r.rank < k;
  r.ndcg = r.hit ? 1.0 / std::log2(static_cast<double>(r.rank) + 2.0) : 0.0;
  return r;
}

UserSlice ranking_user_slice(int64_t rows, int64_t users_per_batch, int rank, int size) {
  ST_CHECK(users_per_batch >= 1, "ranking evaluation: users per batch must be at least 1, got " << users_per_batch);
  const int64_t chunks = (rows + users_per_batch - 1) / users_per_batch;
  UserSlice s;
  s.begin = std::min(rows, chunks * rank / size * users_per_batch);
  s.end = std::min(rows, chunks * (rank + 1) / size * users_per_batch);
  return s;
}

Tensor score_pairs(Context& ctx, models::NeuMF& model, const Tensor& users, const Tensor& items, Tensor& device_users,
                   Tensor& device_items) {
  const Tensor logits = ops::as_f32(ctx, model.forward(ctx, on_context_device(ctx, users, device_users),
                                                       on_context_device(ctx, items, device_items)));
  return logits.device() == Device::cpu ? logits : logits.to(Device::cpu);
}

namespace {

// Rows [first, first + n) of val into the chunk's (users, items) pairs, the rows after n (the
// padding of the split's last chunk) copies of its last row.
void fill_chunk(const data::RecommendationSplit& val, int64_t first, int64_t n, Tensor& users, Tensor& items) {
  const int64_t negatives = val.negatives_per_user, per_user = 1 + negatives;
  const int64_t chunk_users = users.numel() / per_user;
  int32_t* u = users.data<int32_t>();
  int32_t* it = items.data<int32_t>();
  for (int64_t r = 0; r < chunk_users; ++r) {
    const int64_t row = first + std::min(r, n - 1);
    std::fill(u + r * per_user, u + (r + 1) * per_user, val.user[row]);
    it[r * per_user] = val.item[row];
    std::copy(val.negatives.begin() + row * negatives, val.negatives.begin() + (row + 1) * negatives,
              it + r * per_user + 1);
  }
}

}  // namespace

RankingResult evaluate_ranking(const comm::Communicator& comm, Context& ctx, models::NeuMF& model,
                               const data::RecommendationSplit& val, int64_t users_per_batch, int k,
                               std::vector<float>* scores) {
  ST_CHECK(val.is_evaluation(),
           "ranking evaluation: " << val.dir << " is not an evaluation split (it has no negatives)");
  ST_CHECK(users_per_batch >= 1, "ranking evaluation: users per batch must be at least 1, got " << users_per_batch);
  ST_CHECK(k >= 1, "ranking evaluation: the cut-off k must be at least 1, got " << k);
  progress::enter("ranking evaluation");
  const int64_t negatives = val.negatives_per_user, per_user = 1 + negatives;
  const UserSlice slice = ranking_user_slice(val.rows(), users_per_batch, comm.rank(), comm.size());
  if (scores) scores->assign(static_cast<size_t>((slice.end - slice.begin) * per_user), 0.0f);

  // Every forward has users_per_batch users: the same GEMM shapes on every rank and rank count.
  // The pairs are made on the host and cross to the context's device; the logits come back.
  Tensor users = Tensor::empty({users_per_batch * per_user}, DType::i32);
  Tensor items = Tensor::empty({users_per_batch * per_user}, DType::i32);
  Tensor device_users, device_items;
  std::vector<float> probability;
  std::vector<int64_t> hits_at(static_cast<std::size_t>(k), 0);  // users whose held-out item ranks r < k
  for (int64_t first = slice.begin; first < slice.end; first += users_per_batch) {
    const int64_t n = std::min(users_per_batch, slice.end - first);
    fill_chunk(val, first, n, users, items);
    const Tensor host_logits = score_pairs(ctx, model, users, items, device_users, device_items);
    const float* x = host_logits.data<float>();
    probability.resize(static_cast<size_t>(n * per_user));
    for (int64_t i = 0; i < n * per_user; ++i) probability[i] = 1.0f / (1.0f + std::exp(-x[i]));
    for (int64_t r = 0; r < n; ++r) {
      const float* p = probability.data() + r * per_user;
      const UserRanking result = rank_heldout_item(p[0], p + 1, negatives, k);
      if (result.hit) ++hits_at[static_cast<std::size_t>(result.rank)];
    }
    if (scores) std::copy(probability.begin(), probability.end(), scores->begin() + (first - slice.begin) * per_user);
    progress::tick();
  }
  progress::enter("ranking evaluation results", /*waiting=*/true);
  // Integer counts per rank position, summed exactly (one gather; counts are far below 2^53), then
  // NDCG summed in one fixed order: the same double on every rank count (a sum of the ranks'
  // partial sums would round by partition).
  const std::vector<double> all = comm.allgather(std::vector<double>(hits_at.begin(), hits_at.end()));
  RankingResult result;
  result.users = comm.allreduce_sum(slice.end - slice.begin);
  for (int r = 0; r < k; ++r) {
    double count = 0.0;
    for (int p = 0; p < comm.size(); ++p) count += all[static_cast<std::size_t>(p) * k + r];
    result.hits += static_cast<int64_t>(count);
    result.ndcg_sum += count * (1.0 / std::log2(static_cast<double>(r) + 2.0));
  }
  return result;
}

}  // namespace scaletrain::train
