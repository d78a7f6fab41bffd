// The translation task's loss normalisation (issue 25): P ranks, each holding part of a global
// batch of sentence pairs of different lengths, compute their gradients through the task
// (forward_and_loss, backward), and the mean over the ranks (what the gradient reducer applies)
// equals the gradient one process computes holding the whole batch: that of the mean over all
// real target tokens of the global batch, not a mean of per-rank means (which would weigh a
// rank's tokens by 1 / its own count). The same check with per-rank means would fail: the ranks'
// token counts differ. Dropout is off (a Transformer built with dropout 0) so that the split
// and the whole batch see the same function.
// ST_MPI_RANKS: 2 3
#include <boost/test/unit_test.hpp>
#include <cmath>

#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/core/rng.hpp"
#include "scaletrain/models/transformer.hpp"
#include "scaletrain/train/config.hpp"
#include "scaletrain/train/task.hpp"

using namespace scaletrain;

namespace {

constexpr int64_t kVocab = 40, kSentences = 7, kSourceLength = 9, kTargetLength = 8;

struct GlobalBatch {
  std::vector<int32_t> source, source_lengths, target_input, target;
  std::vector<int64_t> target_lengths;
};

// Sentences of 2 to 9 source and 2 to 8 target tokens (end of sentence included), padded.
GlobalBatch make_batch() {
  GlobalBatch g;
  Rng rng(11);
  g.source.assign(kSentences * kSourceLength, 0);
  g.target.assign(kSentences * kTargetLength, 0);
  g.target_input.assign(kSentences * kTargetLength, 0);
  for (int64_t i = 0; i < kSentences; ++i) {
    const int64_t ls = 2 + static_cast<int64_t>(rng.below(kSourceLength - 1));
    const int64_t lt = 2 + static_cast<int64_t>(rng.below(kTargetLength - 1));
    for (int64_t t = 0; t < ls; ++t)
      g.source[i * kSourceLength + t] = t + 1 == ls ? 1 : 2 + static_cast<int32_t>(rng.below(kVocab - 2));
    for (int64_t t = 0; t < lt; ++t)
      g.target[i * kTargetLength + t] = t + 1 == lt ? 1 : 2 + static_cast<int32_t>(rng.below(kVocab - 2));
    for (int64_t t = 1; t < kTargetLength; ++t)
      g.target_input[i * kTargetLength + t] = g.target[i * kTargetLength + t - 1];
    g.source_lengths.push_back(static_cast<int32_t>(ls));
    g.target_lengths.push_back(lt);
  }
  return g;
}

// Rows [first, end) of the global batch as the task's batch, with the step's totals.
train::Batch rows_of(const GlobalBatch& g, int64_t first, int64_t end, int64_t step_tokens, int64_t ranks) {
  const int64_t n = end - first;
  train::Batch b;
  const auto ints = [&](const char* name, const std::vector<int32_t>& v, int64_t width) {
    Tensor& t = b.slot(name);
    t = width > 0 ? Tensor::empty({n, width}, DType::i32) : Tensor::empty({n}, DType::i32);
    const int64_t w = std::max<int64_t>(width, 1);
    std::copy(v.begin() + first * w, v.begin() + end * w, t.data<int32_t>());
  };
  ints("source", g.source, kSourceLength);
  ints("source_lengths", g.source_lengths, 0);
  ints("target_input", g.target_input, kTargetLength);
  ints("target", g.target, kTargetLength);
  for (const auto& [name, value] : {std::pair<const char*, int64_t>{"step_target_tokens", step_tokens},
                                    std::pair<const char*, int64_t>{"step_ranks", ranks}}) {
    Tensor& t = b.slot(name);
    t = Tensor::empty({n}, DType::i64);
    std::fill_n(t.data<int64_t>(), n, value);
  }
  return b;
}

// The model's flat gradient after one forward and backward of `batch` through the task.
Tensor gradient(train::Task& task, const train::Batch& batch, double& loss) {
  models::TransformerConfig c = models::transformer_config("transformer-tiny");
  c.dropout = 0.0;
  models::Transformer model(c, kVocab, 5);
  model.initialize(5);
  Context ctx(Device::cpu, 1);
  loss = task.forward_and_loss(ctx, model, batch);
  task.backward(ctx, model);
  return model.params().flat_grads().clone();
}

double relative_l2(const Tensor& a, const Tensor& b) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = a.data<float>()[i] - b.data<float>()[i];
    num += d * d;
    den += static_cast<double>(b.data<float>()[i]) * b.data<float>()[i];
  }
  return std::sqrt(num / den);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(translation_loss)

BOOST_AUTO_TEST_CASE(mean_over_the_global_batch_tokens) {
  const comm::Communicator comm = comm::Communicator::world();
  const int p = comm.size(), r = comm.rank();
  train::TrainConfig c;
  c.model = "transformer-tiny";
  c.label_smoothing = 0.1;
  train::DataShape shape;
  shape.num_items = kVocab;
  const std::unique_ptr<train::Task> task = train::open_task_of_shape(c, shape);

  const GlobalBatch g = make_batch();
  int64_t total = 0;
  for (int64_t l : g.target_lengths) total += l;
  const int64_t first = kSentences * r / p, end = kSentences * (r + 1) / p;
  int64_t mine = 0;
  for (int64_t i = first; i < end; ++i) mine += g.target_lengths[i];

  double part_loss = 0, whole_loss = 0;
  Tensor split = gradient(*task, rows_of(g, first, end, total, p), part_loss);
  comm.allreduce_mean(split);
  const Tensor whole = gradient(*task, rows_of(g, 0, kSentences, total, 1), whole_loss);
  const double err = relative_l2(split, whole);
  BOOST_TEST_MESSAGE("rank " << r << " of " << p << ": " << mine << " of " << total
                             << " target tokens; relative L2 of the mean gradient to one process's: " << err);
  BOOST_TEST(err < 1e-5);
  // The losses: the token-weighted mean of the ranks' means is the whole batch's mean.
  const double weighted = comm.allreduce_sum(part_loss * static_cast<double>(mine)) / static_cast<double>(total);
  BOOST_TEST(std::abs(weighted - whole_loss) < 1e-5 * std::abs(whole_loss));
  // A mean of per-rank means would differ: the ranks hold different token counts.
  const double mean_of_means = comm.allreduce_sum(part_loss) / p;
  BOOST_TEST(std::abs(mean_of_means - whole_loss) > 1e-4 * std::abs(whole_loss));
}

BOOST_AUTO_TEST_SUITE_END()
