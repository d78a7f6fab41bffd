// NCF's per-rank training batches (recommendation_batches.hpp): the epoch's layout, the keyed
// permutation and the rank slices.
#include "scaletrain/data/recommendation_batches.hpp"

#include <algorithm>

#include "scaletrain/core/error.hpp"
#include "scaletrain/core/rng.hpp"

namespace scaletrain::data {
namespace {
constexpr uint64_t kPermutationSalt = 0x4e434650ULL;  // "NCFP"
constexpr int kFeistelRounds = 6;
constexpr int64_t kCacheEntries = 1 << 14;
// Samples prepared at a time (whole batches; at least one): 4M take 48 MB of batches and 64 MB
// while they are sorted.
constexpr int64_t kWindowSamples = int64_t{1} << 22;

uint64_t mix64(uint64_t z) {  // splitmix64's finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

int64_t checked_total(const RecommendationSplit& train, int negatives_per_positive) {
  ST_CHECK(!train.is_evaluation(), "recommendation batches: " << train.dir
                                                              << " is an evaluation split (it has negatives); NCF "
                                                                 "trains on the training positives (train/)");
  ST_CHECK(train.rows() > 0, "recommendation batches: " << train.dir << " has no training positives");
  ST_CHECK(negatives_per_positive >= 1,
           "recommendation batches: negatives per positive must be at least 1, got " << negatives_per_positive);
  return train.rows() * (1 + static_cast<int64_t>(negatives_per_positive));
}
}  // namespace

EpochPermutation::EpochPermutation(int64_t size, uint64_t seed, int64_t epoch) : size_(size) {
  ST_CHECK(size >= 1, "epoch permutation: size must be at least 1, got " << size);
  half_bits_ = 1;
  while ((int64_t{1} << (2 * half_bits_)) < size) ++half_bits_;
  half_mask_ = (uint64_t{1} << half_bits_) - 1;
  Rng rng = Rng::derive(seed, static_cast<uint64_t>(epoch), kPermutationSalt);
  for (uint64_t& k : keys_) k = rng.next_u64();
}

uint64_t EpochPermutation::round(int r, uint64_t half) const { return mix64(keys_[r] ^ half) & half_mask_; }

int64_t EpochPermutation::at(int64_t i) const {
  ST_CHECK(i >= 0 && i < size_, "epoch permutation: position " << i << " outside [0, " << size_ << ")");
  // A Feistel network is a bijection of [0, 4^h); walking the cycle until the value falls in
  // [0, size) makes it one of [0, size) (4^h < 4 size, so fewer than 4 rounds on average).
  uint64_t x = static_cast<uint64_t>(i);
  do {
    uint64_t left = x >> half_bits_, right = x & half_mask_;
    for (int r = 0; r < kFeistelRounds; ++r) {
      const uint64_t next = left ^ round(r, right);
      left = right;
      right = next;
    }
    x = (left << half_bits_) | right;
  } while (x >= static_cast<uint64_t>(size_));
  return static_cast<int64_t>(x);
}

RecommendationBatches::RecommendationBatches(const RecommendationSplit& train, int rank, int world_size,
                                             int64_t batch_size, int negatives_per_positive, uint64_t seed,
                                             bool shuffle)
    : train_(train),
      rank_(rank),
      world_(world_size),
      batch_size_(batch_size),
      per_positive_(negatives_per_positive),
      seed_(seed),
      shuffle_(shuffle),
      total_(checked_total(train, negatives_per_positive)),
      positives_(train.num_users, train.num_items, train.user.data(), train.item.data(), train.rows()),
      sampler_(positives_, negatives_per_positive, seed),
      permutation_(total_, seed, 0) {
  ST_CHECK(world_size >= 1 && rank >= 0 && rank < world_size,
           "recommendation batches: rank " << rank << " is outside a world of " << world_size);
  ST_CHECK(batch_size >= 1, "recommendation batches: batch size must be at least 1, got " << batch_size);
  const int64_t per_rank = total_ / world_size;
  steps_ = per_rank / batch_size;
  ST_CHECK(steps_ >= 1, "recommendation batches: " << total_ << " samples per epoch (" << train.rows()
                                                   << " positives x (1 + " << negatives_per_positive
                                                   << " negatives)) are too few for " << world_size << " ranks x batch "
                                                   << batch_size
                                                   << " per rank: every rank needs at least one full batch");
  rank_begin_ = static_cast<int64_t>(rank) * per_rank;
  steps_per_window_ = std::max<int64_t>(1, std::min(steps_, kWindowSamples / batch_size));
  // Pinned where a GPU is open (copied to it ahead of each step: --input-copy overlap).
  window_users_ = Tensor::empty_pinned({steps_per_window_ * batch_size}, DType::i32);
  window_items_ = Tensor::empty_pinned({steps_per_window_ * batch_size}, DType::i32);
  window_labels_ = Tensor::empty_pinned({steps_per_window_ * batch_size}, DType::f32);
  cache_positive_.assign(kCacheEntries, -1);
  cache_negatives_.resize(static_cast<size_t>(kCacheEntries) * per_positive_);
}

void RecommendationBatches::start_epoch(int epoch, int64_t first_step) {
  ST_CHECK(epoch >= 0, "recommendation batches: epoch must be >= 0, got " << epoch);
  ST_CHECK(first_step >= 0 && first_step <= steps_, "recommendation batches: first step "
                                                        << first_step << " is outside [0, " << steps_
                                                        << "] for an epoch of " << steps_ << " steps");
  if (epoch != epoch_) {
    permutation_ = EpochPermutation(total_, seed_, epoch);
    std::fill(cache_positive_.begin(), cache_positive_.end(), -1);  // negatives change every epoch
    window_first_step_ = -1;
  }
  epoch_ = epoch;
  step_ = first_step;
}

int64_t RecommendationBatches::sample_id(int epoch, int64_t i) const {
  ST_CHECK(i >= 0 && i < samples_per_epoch(),
           "recommendation batches: position " << i << " outside [0, " << samples_per_epoch() << ")");
  const int64_t position = rank_begin_ + i;
  if (!shuffle_) return position;
  if (epoch == epoch_) return permutation_.at(position);
  return EpochPermutation(total_, seed_, epoch).at(position);
}

const int32_t* RecommendationBatches::negatives_of(int64_t positive) {
  const int64_t slot = positive & (kCacheEntries - 1);
  int32_t* out = cache_negatives_.data() + slot * per_positive_;
  if (cache_positive_[slot] != positive) {
    sampler_.sample(epoch_, positive, train_.user[positive], out);
    cache_positive_[slot] = positive;
  }
  return out;
}

void RecommendationBatches::fill_window(int64_t window_first_step) {
  const int64_t steps = std::min(steps_per_window_, steps_ - window_first_step);
  const int64_t n = steps * batch_size_, first = window_first_step * batch_size_;
  const int64_t stride = 1 + per_positive_;
  int32_t* u = window_users_.data<int32_t>();
  int32_t* it = window_items_.data<int32_t>();
  float* l = window_labels_.data<float>();
  // The window's samples are visited in id order (hence positive order) and written to their
  // positions: over millions of samples the lookups into the positives and each user's list then
  // run forwards through memory instead of jumping at random, and the negatives of a positive
  // that occurs more than once in the window are mostly drawn once (the cache).
  order_.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order_[i] = {sample_id(epoch_, first + i), i};
  std::sort(order_.begin(), order_.end());
  for (const auto& [s, i] : order_) {
    const int64_t p = s / stride, j = s % stride;
    u[i] = train_.user[p];
    if (j == 0) {
      it[i] = train_.item[p];
      l[i] = 1.0f;
    } else {
      it[i] = negatives_of(p)[j - 1];
      l[i] = 0.0f;
    }
  }
  window_first_step_ = window_first_step;
}

bool RecommendationBatches::next(Tensor& users, Tensor& items, Tensor& labels) {
  if (epoch_ < 0 || step_ >= steps_) return false;
  const int64_t window_first_step = step_ / steps_per_window_ * steps_per_window_;
  if (window_first_step != window_first_step_) fill_window(window_first_step);
  const int64_t offset = (step_ - window_first_step_) * batch_size_;
  users = Tensor::view_of(window_users_, offset, {batch_size_});
  items = Tensor::view_of(window_items_, offset, {batch_size_});
  labels = Tensor::view_of(window_labels_, offset, {batch_size_});
  ++step_;
  return true;
}

}  // namespace scaletrain::data
