// The translation task's token-budget batches (include/scaletrain/data/translation_batches.hpp).
#include "scaletrain/data/translation_batches.hpp"

#include <algorithm>

#include "scaletrain/core/error.hpp"
#include "scaletrain/core/rng.hpp"

namespace scaletrain::data {
namespace {

// Keeps the epoch shuffle's stream apart from the other streams of the run's seed.
constexpr uint64_t kShuffleDomain = 0x7472616e736c6174ull;  // "translat"

int64_t pair_length(const SentencePairs& p, int64_t i) { return std::max(p.source_length(i), p.target_length(i)); }

}  // namespace

std::vector<int64_t> length_bucket_bounds(int64_t max_length) {
  std::vector<int64_t> bounds;
  for (int64_t x = 8; x < max_length; x = std::max(x + 1, static_cast<int64_t>(x * 1.1))) bounds.push_back(x);
  bounds.push_back(max_length + 1);
  return bounds;
}

TranslationBatches::TranslationBatches(const SentencePairs& pairs, int64_t max_length, int rank, int world,
                                       int64_t batch_tokens, uint64_t seed, bool shuffle)
    : pairs_(pairs), rank_(rank), world_(world), seed_(seed), shuffle_(shuffle) {
  const std::vector<int64_t> bounds = length_bucket_bounds(max_length);
  std::vector<int64_t> counts(bounds.size(), 0);
  bucket_.resize(static_cast<std::size_t>(pairs.size()));
  int64_t longest = 0, longest_pair = 0;
  for (int64_t i = 0; i < pairs.size(); ++i) {
    const int64_t len = pair_length(pairs, i);
    const auto b = std::upper_bound(bounds.begin(), bounds.end(), len) - bounds.begin();
    ST_CHECK(b < static_cast<int64_t>(bounds.size()),
             "translation pair " << i << " has " << len << " tokens, more than the split's max_length " << max_length);
    bucket_[i] = static_cast<int>(b);
    ++counts[b];
    if (len > longest) longest = len, longest_pair = i;
  }
  for (std::size_t b = 0; b < bounds.size(); ++b) {
    bucket_batch_.push_back(batch_tokens / bounds[b]);
    if (counts[b] == 0) continue;
    ST_CHECK(bucket_batch_[b] >= 1, "--batch-tokens " << batch_tokens << " is too small for the training data: pair "
                                                      << longest_pair << " has " << longest << " tokens, and pairs of "
                                                      << (b == 0 ? 0 : bounds[b - 1]) << " to " << bounds[b] - 1
                                                      << " tokens are batched " << batch_tokens << " / " << bounds[b]
                                                      << " to a step (the reference's length buckets); give at least "
                                                      << bounds.back());
    batches_ += (counts[b] + bucket_batch_[b] - 1) / bucket_batch_[b];
  }
  steps_ = batches_ / world;
}

std::vector<std::vector<int64_t>> TranslationBatches::plan_epoch(int epoch) const {
  std::vector<int64_t> order(static_cast<std::size_t>(pairs_.size()));
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  if (shuffle_) {
    Rng rng = Rng::derive(seed_, kShuffleDomain, static_cast<uint64_t>(epoch));
    for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  }
  std::vector<std::vector<int64_t>> open(bucket_batch_.size()), batches;
  for (int64_t i : order) {
    std::vector<int64_t>& window = open[bucket_[i]];
    window.push_back(i);
    if (static_cast<int64_t>(window.size()) == bucket_batch_[bucket_[i]]) {
      batches.push_back(std::move(window));
      window.clear();
    }
  }
  for (auto& window : open)
    if (!window.empty()) batches.push_back(std::move(window));
  return batches;
}

void TranslationBatches::start_epoch(int epoch, int64_t first_step) {
  epoch_ = plan_epoch(epoch);
  ST_CHECK(static_cast<int64_t>(epoch_.size()) == batches_,
           "internal: epoch " << epoch << " has " << epoch_.size() << " batches, expected " << batches_);
  step_ = first_step;
}

bool TranslationBatches::next(Tensor& source, Tensor& source_lengths, Tensor& target_input, Tensor& target,
                              TranslationStepTotals& totals) {
  if (step_ >= steps_) return false;
  totals = {};
  for (int r = 0; r < world_; ++r)
    for (int64_t i : epoch_[step_ * world_ + r]) {
      ++totals.sentences;
      totals.source_tokens += pairs_.source_length(i);
      totals.target_tokens += pairs_.target_length(i);
    }
  const std::vector<int64_t>& batch = epoch_[step_ * world_ + rank_];
  ++step_;
  const int64_t n = static_cast<int64_t>(batch.size());
  int64_t ls = 1, lt = 1;
  for (int64_t i : batch) ls = std::max(ls, pairs_.source_length(i)), lt = std::max(lt, pairs_.target_length(i));
  source = Tensor::zeros({n, ls}, DType::i32);
  source_lengths = Tensor::empty({n}, DType::i32);
  target_input = Tensor::zeros({n, lt}, DType::i32);
  target = Tensor::zeros({n, lt}, DType::i32);
  int32_t* src = source.data<int32_t>();
  int32_t* len = source_lengths.data<int32_t>();
  int32_t* in = target_input.data<int32_t>();
  int32_t* out = target.data<int32_t>();
  for (int64_t k = 0; k < n; ++k) {
    const int64_t i = batch[k], sl = pairs_.source_length(i), tl = pairs_.target_length(i);
    std::copy(pairs_.source(i), pairs_.source(i) + sl, src + k * ls);
    len[k] = static_cast<int32_t>(sl);
    std::copy(pairs_.target(i), pairs_.target(i) + tl, out + k * lt);
    // Shifted right: position t sees target t - 1; position 0 the start (id 0, the zero vector).
    std::copy(pairs_.target(i), pairs_.target(i) + std::min(tl, lt - 1), in + k * lt + 1);
  }
  return true;
}

}  // namespace scaletrain::data
