// The translation task's training batches, per rank: whole sentence pairs up to a token budget,
// grouped by length as the MLPerf reference groups them (utils/dataset.py):
//   - a pair's length is max(source, target) tokens (end of sentence included);
//   - bucket boundaries start at 8 and grow by max(1, 10%) while below max_length (8, 9, ..., 20,
//     22, 24, ..., 236 for the reference's 256), the last bucket ending at max_length + 1;
//   - a bucket's batches hold batch_tokens / (its upper bound) pairs, so that neither side of a
//     padded batch exceeds batch_tokens (the reference's batch_size, in tokens per GPU);
//   - pairs are taken in the epoch's order, each into its bucket, a batch emitted when its
//     bucket fills; the partial batches are emitted at the end, in bucket order.
// The epoch's order is a shuffle of all pairs by (seed, epoch) alone (global: not per shard, not
// per rank), so a run stopped mid-epoch resumes with the same batches. The batches of an epoch
// form one list; step s of rank r is batch s * P + r, and every rank runs floor(batches / P)
// steps (the last few batches, fewer than P, wait for the next epoch's shuffle). Each bucket
// yields ceil(pairs in it / its batch size) batches whatever the order, so every epoch has the
// same number of steps.
#pragma once

#include <cstdint>
#include <vector>

#include "scaletrain/data/translation.hpp"
#include "scaletrain/tensor/tensor.hpp"

namespace scaletrain::data {

// The upper bounds (exclusive) of the reference's length buckets for sentences of at most
// max_length tokens: {8, 9, ..., 20, 22, 24, ..., 215, 236, 257} for 256 (42 buckets, the first
// [0, 8)).
std::vector<int64_t> length_bucket_bounds(int64_t max_length);

// One step's totals over every rank's batch: what the loss is normalised by and the progress line
// counts.
struct TranslationStepTotals {
  int64_t sentences = 0;
  int64_t source_tokens = 0, target_tokens = 0;  // real tokens, end of sentence included
};

class TranslationBatches {
 public:
  // pairs: the training split (kept by reference). batch_tokens: per rank. Throws naming
  // --batch-tokens when a pair does not fit in it (its bucket's bound is larger).
  TranslationBatches(const SentencePairs& pairs, int64_t max_length, int rank, int world, int64_t batch_tokens,
                     uint64_t seed, bool shuffle);

  int64_t steps_per_epoch() const { return steps_; }
  int64_t batches_per_epoch() const { return batches_; }
  // first_step > 0: resume the epoch at that step.
  void start_epoch(int epoch, int64_t first_step);
  // The next batch of this rank, as padded int32 tensors: source (B, Ls) and its lengths (B),
  // target_input (B, Lt) = the target shifted right (0 first), target (B, Lt) the labels, 0 past
  // each sentence (padding, not in the loss). `totals` are the whole step's over every rank.
  // False at the end of the epoch.
  bool next(Tensor& source, Tensor& source_lengths, Tensor& target_input, Tensor& target,
            TranslationStepTotals& totals);

 private:
  std::vector<std::vector<int64_t>> plan_epoch(int epoch) const;
  const SentencePairs& pairs_;
  int rank_, world_;
  uint64_t seed_;
  bool shuffle_;
  std::vector<int> bucket_;            // per pair
  std::vector<int64_t> bucket_batch_;  // pairs per batch, per bucket
  int64_t batches_ = 0, steps_ = 0;
  std::vector<std::vector<int64_t>> epoch_;  // this epoch's batches (pair indices)
  int64_t step_ = 0;
};

}  // namespace scaletrain::data
