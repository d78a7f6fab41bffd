// Negatives for implicit-feedback training and evaluation (NCF, He et al. 2017): items a user has
// not interacted with, drawn uniformly. Training draws fresh negatives every epoch, 4 per positive
// by default (the paper's and MLPerf's NCF reference's ratio). Every draw depends only on
// (seed, epoch, positive index) through a stream of its own (Rng::derive), so the negatives do not
// depend on how positives are split over ranks or threads, nor on the order they are asked for.
#pragma once

#include <cstdint>
#include <vector>

namespace scaletrain::data {

// Negatives per training positive: NCF's ratio (He et al. 2017, section 4.1; MLPerf reference).
constexpr int kDefaultNegativesPerPositive = 4;

// Each user's known positives, sorted and without repeats (CSR), for "is this a positive?" in
// O(log n) and for mapping a rank among the non-positives to an item.
class UserPositives {
 public:
  // user, item: n positives (ids checked against num_users / num_items; repeats are fine).
  UserPositives(int64_t num_users, int64_t num_items, const int32_t* user, const int32_t* item, int64_t n);
  int64_t num_users() const { return num_users_; }
  int64_t num_items() const { return num_items_; }
  // user's distinct positives, sorted: [begin, end).
  const int32_t* begin(int32_t user) const { return items_.data() + start_[user]; }
  const int32_t* end(int32_t user) const { return items_.data() + start_[user + 1]; }
  int64_t count(int32_t user) const { return start_[user + 1] - start_[user]; }
  bool contains(int32_t user, int32_t item) const;
  // The r-th item (0-based, in id order) that is not a positive of user; r < num_items - count.
  int32_t nth_non_positive(int32_t user, int64_t r) const;

 private:
  int64_t num_users_, num_items_;
  std::vector<int64_t> start_;  // [num_users + 1]
  std::vector<int32_t> items_;
};

// Training negatives. Throws at construction, naming the user, when a user with positives has
// interacted with every item (nothing is left to draw). Keeps a reference: `positives` must
// outlive the sampler. Const and stateless after construction, so threads may share one.
class NegativeSampler {
 public:
  NegativeSampler(const UserPositives& positives, int negatives_per_positive, uint64_t seed);
  int negatives_per_positive() const { return per_positive_; }
  // The negatives of positive `index` (its row in the training split) of `user`, for `epoch`:
  // writes negatives_per_positive() items to out. A pure function of (seed, epoch, index, user).
  void sample(int64_t epoch, int64_t index, int32_t user, int32_t* out) const;
  // Positives [begin, end) of the split: out gets (end - begin) * negatives_per_positive() items.
  void sample_range(int64_t epoch, int64_t begin, int64_t end, const int32_t* users, int32_t* out) const;

 private:
  const UserPositives& positives_;
  int per_positive_;
  uint64_t seed_;
};

// Evaluation negatives: for every user, k distinct items that are none of its positives (pass all
// of them, training and held-out), from a stream of (seed, user). Throws naming the user when it
// has fewer than k non-positive items. Returns [num_users * k], row-major.
std::vector<int32_t> sample_eval_negatives(const UserPositives& positives, int64_t k, uint64_t seed);

}  // namespace scaletrain::data
