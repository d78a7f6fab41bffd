// NCF's training batches, per rank (docs/dataset-format.md, "Training samples per epoch").
//
// An epoch holds M = (1 + k) N samples for N training positives and k negatives per positive, laid
// out as the MLPerf reference's CFTrainDataset (mlcommons/training, recommendation/pytorch/
// dataset.py: __len__ = (nb_neg + 1) * positives, sample idx is positive idx // (nb_neg + 1),
// labelled 1 when idx % (nb_neg + 1) == 0, else a fresh negative of that positive's user):
//   sample s: positive p = s / (1 + k), slot j = s % (1 + k);
//   j == 0: (user[p], item[p], 1); j >= 1: (user[p], negative j - 1 of p in this epoch, 0),
// the negatives from NegativeSampler, a pure function of (seed, epoch, p), never a known positive
// of the user. The ids 0 .. M-1 are permuted by (seed, epoch) (shuffle) and cut like the image
// loader's global shuffle with drop_last: rank r takes positions [r * floor(M / P), ...) of the
// permuted order, its first steps * B of them, steps = floor(floor(M / P) / B), so every rank runs
// the same number of full batches and the permutation does not depend on P.
//
// Decisions: the permutation is a keyed bijection of [0, M) (a Feistel network over the next
// power of four, walking cycles back into range) computed per position, not a stored shuffle as
// data::rank_samples makes: ml-20m has M = 99M samples, and a stored permutation would cost
// 0.8 GB per rank and a Fisher-Yates pass per epoch. Everything is in memory, so no threads.
// Batches are prepared a window of about 4M samples at a time (whole batches): the window's ids
// are sorted so that the lookups into the positives, each user's list and the sampler run
// forwards through memory, then each sample is written to its place; a negative costs one
// sample() of its positive's k negatives (a small cache keeps those of recent positives). On the
// 2-core development machine, ml-20m's size (19.9M positives, 138,493 users, k = 4) costs about
// 6 s per epoch for one rank of 8 (12.3M samples; 80 s for all 99M on one rank), 1 s to build,
// and 350 MB (the split's 160 MB included).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "scaletrain/data/negative_sampler.hpp"
#include "scaletrain/data/recommendation.hpp"
#include "scaletrain/tensor/tensor.hpp"

namespace scaletrain::data {

// A keyed pseudo-random permutation of [0, size): at(i) for i in [0, size) hits every value once.
// A pure function of (size, seed, epoch).
class EpochPermutation {
 public:
  EpochPermutation(int64_t size, uint64_t seed, int64_t epoch);
  int64_t size() const { return size_; }
  int64_t at(int64_t i) const;

 private:
  uint64_t round(int r, uint64_t half) const;
  int64_t size_;
  int half_bits_;
  uint64_t half_mask_;
  uint64_t keys_[6];
};

class RecommendationBatches {
 public:
  // train: a training split (positives), kept by reference: it must outlive this object.
  // batch_size: samples per rank per step. Throws scaletrain::Error for an evaluation split, an
  // empty one, a bad rank / world_size / batch_size / negatives_per_positive, a user who has
  // interacted with every item, and too few samples for world_size x batch_size (one full batch
  // per rank).
  RecommendationBatches(const RecommendationSplit& train, int rank, int world_size, int64_t batch_size,
                        int negatives_per_positive = kDefaultNegativesPerPositive, uint64_t seed = 0,
                        bool shuffle = true);

  int64_t steps_per_epoch() const { return steps_; }                  // the same on every rank
  int64_t samples_per_epoch() const { return steps_ * batch_size_; }  // yielded by this rank
  int64_t total_samples() const { return total_; }                    // (1 + k) N, over all ranks
  int negatives_per_positive() const { return per_positive_; }

  // Epochs are numbered from 0. first_step > 0 starts at that batch (a resumed run): the batches
  // after it equal those of an epoch started at 0. Throws for first_step outside
  // [0, steps_per_epoch()].
  void start_epoch(int epoch, int64_t first_step = 0);
  // users, items: (B) i32; labels: (B) f32, 1 for a positive and 0 for a negative. Views of
  // reusable buffers, valid until the next call to next() or start_epoch(). False at the end of
  // the epoch (and before the first start_epoch).
  bool next(Tensor& users, Tensor& items, Tensor& labels);

  // The global sample id (see the layout above) at this rank's position `i` of `epoch`,
  // i in [0, samples_per_epoch()): the plan, exposed for tests.
  int64_t sample_id(int epoch, int64_t i) const;

 private:
  const int32_t* negatives_of(int64_t positive);
  void fill_window(int64_t window_first_step);

  const RecommendationSplit& train_;
  int rank_, world_;
  int64_t batch_size_;
  int per_positive_;
  uint64_t seed_;
  bool shuffle_;
  int64_t total_ = 0, steps_ = 0, rank_begin_ = 0;
  UserPositives positives_;
  NegativeSampler sampler_;
  EpochPermutation permutation_;
  int epoch_ = -1;
  int64_t step_ = 0;
  // The batches of steps [window_first_step_, + steps_per_window_), prepared together.
  int64_t steps_per_window_ = 1, window_first_step_ = -1;
  Tensor window_users_, window_items_, window_labels_;
  // Direct-mapped cache of the negatives of recently seen positives, for the current epoch.
  std::vector<int64_t> cache_positive_;
  std::vector<int32_t> cache_negatives_;
  std::vector<std::pair<int64_t, int64_t>> order_;  // (sample id, window position)
};

}  // namespace scaletrain::data
