// The translation task (task.hpp), MLPerf's Transformer: sentence pairs read whole into memory
// (data/translation.hpp), batched by tokens in the reference's length buckets
// (data/translation_batches.hpp), the Transformer (models/transformer.hpp), label-smoothed token
// cross-entropy normalised by the real target tokens of the whole step; evaluation translates the
// evaluation split (the reference's beam search, --beam-size and --length-penalty, or greedy
// decoding with --beam-size 1) and scores it with BLEU as the reference does (text/bleu.hpp:
// uncased, its tokenisation), on the 0-100 scale users know.
//
// Loss and gradient: every rank's loss is the sum over its real target tokens (padding excluded,
// the end of sentence included, as the reference's weights), its gradient divided by
// T / P, where T is the real target tokens of the step over all ranks (known to every rank from
// the batch plan) and P the ranks; the reducer's mean over the ranks then gives the gradient of
// the mean over all T tokens of the global batch, not a mean of per-rank means
// (mpi.translation_loss checks it against one process holding the whole batch).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "scaletrain/checkpoint/checkpoint.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/log.hpp"
#include "scaletrain/core/rng.hpp"
#include "scaletrain/data/translation.hpp"
#include "scaletrain/data/translation_batches.hpp"
#include "scaletrain/models/model.hpp"
#include "scaletrain/models/registry.hpp"
#include "scaletrain/models/transformer.hpp"
#include "scaletrain/ops/loss.hpp"
#include "scaletrain/text/bleu.hpp"
#include "scaletrain/text/subword_tokenizer.hpp"
#include "scaletrain/text/unicode.hpp"
#include "scaletrain/train/translate.hpp"
#include "train/model_input.hpp"
#include "train/tasks.hpp"

namespace scaletrain::train {
namespace {

// The reference's extra_decode_length: a translation may run this many tokens past its source.
constexpr int64_t kExtraDecodeLength = 50;
// Sentences per decoding forward in evaluation.
constexpr int64_t kEvalSentencesPerBatch = 64;

models::Transformer& transformer(models::Network& network) { return static_cast<models::Transformer&>(network); }

// The step's real target tokens over all ranks and the number of ranks ride in the batch as one
// int64 column each (every row the same value), so that they survive the batch's row views: the
// loss's gradient is divided by tokens / ranks.
constexpr const char* kStepTokens = "step_target_tokens";
constexpr const char* kStepRanks = "step_ranks";

void fill_column(Batch& b, const char* name, int64_t rows, int64_t value) {
  Tensor& t = b.slot(name);
  t = Tensor::empty({rows}, DType::i64);
  std::fill_n(t.data<int64_t>(), rows, value);
}

class TranslationSource : public BatchSource {
 public:
  TranslationSource(const data::TranslationSplit& train, int rank, int world, int64_t batch_tokens, uint64_t seed,
                    bool shuffle)
      : batches_(train.pairs, train.vocabulary.max_length, rank, world, batch_tokens, seed, shuffle), world_(world) {}
  int64_t steps_per_epoch() const override { return batches_.steps_per_epoch(); }
  void start_epoch(int epoch, int64_t first_step) override { batches_.start_epoch(epoch, first_step); }
  bool next(Batch& batch) override {
    data::TranslationStepTotals totals;
    if (!batches_.next(batch.slot("source"), batch.slot("source_lengths"), batch.slot("target_input"),
                       batch.slot("target"), totals))
      return false;
    const int64_t n = batch.at("source").dim(0);
    fill_column(batch, kStepTokens, n, totals.target_tokens);
    fill_column(batch, kStepRanks, n, world_);
    last_ = {totals.sentences, totals.target_tokens};
    return true;
  }
  std::optional<StepWork> last_step_work() const override { return last_; }

 private:
  data::TranslationBatches batches_;
  int world_;
  StepWork last_;
};

// Sentence i's ids without padding, its end of sentence cut.
std::vector<int32_t> sentence_ids(const int32_t* ids, int64_t length) {
  std::vector<int32_t> out(ids, ids + length);
  if (!out.empty() && out.back() == text::kEosId) out.pop_back();
  return out;
}

// Each sentence's ids: the reference's beam search (beam 4, alpha 0.6 by default), or greedy
// decoding for --beam-size 1; at most the source's length + 50 tokens either way.
std::vector<std::vector<int32_t>> decode_batch(const TrainConfig& cfg, Context& ctx, models::Network& network,
                                               const Tensor& source, const Tensor& lengths) {
  models::Transformer& model = transformer(network);
  if (cfg.beam_size == 1) return model.translate_greedy(ctx, source, lengths, kExtraDecodeLength);
  std::vector<std::vector<int32_t>> out;
  for (models::BeamSearchResult& r :
       model.translate_beam(ctx, source, lengths, cfg.beam_size, cfg.length_penalty, kExtraDecodeLength))
    out.push_back(std::move(r.ids));
  return out;
}

// The sources (ids ending in the end of sentence) in contiguous ranges over the ranks, decoded
// kEvalSentencesPerBatch at a time and turned into text; every rank gets every translation, in
// order, one line each. A source of the end of sentence alone (an empty line) translates to "".
// Collective.
std::vector<std::string> translate_sources(const TrainConfig& cfg, const comm::Communicator& comm, Context& ctx,
                                           models::Network& network, const text::SubwordTokenizer& tokenizer,
                                           const std::vector<std::vector<int32_t>>& sources) {
  const int64_t n = static_cast<int64_t>(sources.size());
  const int64_t first = n * comm.rank() / comm.size(), end = n * (comm.rank() + 1) / comm.size();
  std::string mine;
  for (int64_t b = first; b < end; b += kEvalSentencesPerBatch) {
    const int64_t count = std::min(kEvalSentencesPerBatch, end - b);
    std::vector<int64_t> rows;  // the batch's sentences with something to translate
    int64_t ls = 1;
    for (int64_t i = b; i < b + count; ++i) {
      if (sources[i].size() <= 1) continue;
      rows.push_back(i);
      ls = std::max(ls, static_cast<int64_t>(sources[i].size()));
    }
    std::vector<std::string> lines(count);
    if (!rows.empty()) {
      const int64_t k = static_cast<int64_t>(rows.size());
      Tensor source = Tensor::zeros({k, ls}, DType::i32), lengths = Tensor::empty({k}, DType::i32);
      for (int64_t r = 0; r < k; ++r) {
        const std::vector<int32_t>& ids = sources[rows[r]];
        std::copy(ids.begin(), ids.end(), source.data<int32_t>() + r * ls);
        lengths.data<int32_t>()[r] = static_cast<int32_t>(ids.size());
      }
      const std::vector<std::vector<int32_t>> decoded = decode_batch(cfg, ctx, network, source, lengths);
      for (int64_t r = 0; r < k; ++r) {
        std::string line = tokenizer.decode(decoded[r]);
        std::replace(line.begin(), line.end(), '\n', ' ');  // one sentence a line
        lines[rows[r] - b] = std::move(line);
      }
    }
    for (const std::string& line : lines) mine += line + "\n";
  }
  std::vector<std::string> out;
  for (const std::string& part : comm.allgather(mine)) {
    std::istringstream in(part);
    for (std::string line; std::getline(in, line);) out.push_back(line);
  }
  ST_CHECK(static_cast<int64_t>(out.size()) == n,
           "internal: " << out.size() << " translations gathered for " << n << " sentences");
  return out;
}

class Translation : public Task {
 public:
  explicit Translation(const TrainConfig& c)
      : cfg_(c),
        train_(data::open_translation_split(c.data_dir, "train")),
        val_(data::open_translation_split(c.data_dir, "val")) {
    data::check_same_vocabulary(train_, val_);
  }
  Translation(const TrainConfig& c, data::TranslationSplit train, data::TranslationSplit val)
      : cfg_(c), train_(std::move(train)), val_(std::move(val)) {}

  const char* name() const override { return models::kTaskTranslation; }
  const char* quality_metric() const override { return "bleu"; }
  const char* work_unit() const override { return "tokens"; }
  std::string describe_quality(double value) const override {
    char text[32] = "bleu -";
    if (!std::isnan(value)) std::snprintf(text, sizeof text, "bleu %.2f", value);
    return text;
  }
  std::string mlperf_benchmark() const override { return "transformer"; }
  Json mlperf_keys(int64_t /*micro_batch*/) const override {
    Json keys = Json::object();
    keys.set("opt_learning_rate_warmup_steps", cfg_.warmup_steps);
    keys.set("max_sequence_length", train_.vocabulary.max_length);
    return keys;
  }
  // closed_transformer.yaml wants the method, truncate or discard. Data where nothing was cut
  // (length_method none: synthetic pairs, text within the limit) is logged as discard, which is
  // what happened: no pair was longer than max_length, so none was dropped.
  Json mlperf_key_metadata() const override {
    Json method = Json::object();
    method.set("method", train_.vocabulary.length_method == "truncate" ? "truncate" : "discard");
    Json metadata = Json::object();
    metadata.set("max_sequence_length", method);
    return metadata;
  }
  int64_t train_samples() const override { return train_.pairs.size(); }
  int64_t eval_samples() const override { return val_.pairs.size(); }

  Json stage(const comm::Communicator&, const comm::Topology&) override {
    ST_LOG("--stage-to " << cfg_.stage_to << ": translation data is read whole into memory; nothing is staged");
    return Json();
  }

  std::string describe_data() const override {
    std::ostringstream out;
    out << train_.pairs.size() << " sentence pairs " << train_.vocabulary.source_language << " -> "
        << train_.vocabulary.target_language << " (" << train_.pairs.target_offsets.back()
        << " target tokens), vocabulary " << train_.vocabulary.size << ", max_length " << train_.vocabulary.max_length
        << " (" << train_.vocabulary.length_method << "); " << val_.pairs.size() << " pairs to translate for BLEU";
    return out.str();
  }
  std::string describe_input() const override {
    return std::string("int32 shards read whole into memory, batches of up to ") + std::to_string(cfg_.batch_tokens) +
           " tokens a side per rank in the reference's length buckets, shuffle " + (cfg_.shuffle ? "global" : "off");
  }
  Json dataset_json() const override {
    Json d = Json::object();
    d.set("dir", cfg_.data_dir);
    d.set("task", name());
    d.set("train_samples", train_samples());
    d.set("val_samples", eval_samples());
    d.set("train_target_tokens", train_.pairs.target_offsets.back());
    d.set("train_source_tokens", train_.pairs.source_offsets.back());
    d.set("vocab_size", train_.vocabulary.size);
    d.set("max_length", train_.vocabulary.max_length);
    d.set("length_method", train_.vocabulary.length_method);
    d.set("unchecked_shards",
          unchecked_shards_json({{train_.dir, train_.unchecked_shards}, {val_.dir, val_.unchecked_shards}}));
    return d;
  }
  Json input_json() const override {
    Json in = Json::object();
    in.set("io", "memory");
    in.set("encoding", "int32");
    in.set("batch_tokens", cfg_.batch_tokens);
    return in;
  }
  void add_identity(Json& j) const override {
    j.set("dataset train pairs", train_.pairs.size());
    j.set("dataset vocabulary", train_.vocabulary.size);
    j.set("dataset eval pairs", val_.pairs.size());
    j.set("--batch-tokens", cfg_.batch_tokens);
  }

  std::unique_ptr<BatchSource> training_batches(const comm::Communicator& comm, int64_t batch_size,
                                                int /*ranks_on_node*/) const override {
    require_files(train_.dir, "training batches");
    return std::make_unique<TranslationSource>(train_, comm.rank(), comm.size(), batch_size, cfg_.seed, cfg_.shuffle);
  }

  // No device_batch_keys: token batches change shape from step to step, so each prefetched copy
  // would get fresh memory and wait for the queued compute anyway (BatchUpload::begin), and the
  // step reads the token counts and the targets (batch_work) on the host.

  // Sentences of kSyntheticSentenceTokens tokens a side with random ids, as many as `size` tokens
  // hold (at least one).
  Batch synthetic_batch(int64_t size, uint64_t seed) const override {
    const int64_t len = kSyntheticSentenceTokens, n = std::max<int64_t>(1, size / len);
    Batch b;
    Rng rng = Rng::derive(seed, static_cast<uint64_t>(size));
    const auto ids = [&](Tensor& t, bool shifted) {
      t = Tensor::empty({n, len}, DType::i32);
      for (int64_t i = 0; i < n * len; ++i)
        t.data<int32_t>()[i] =
            shifted && i % len == 0 ? 0 : 2 + static_cast<int32_t>(rng.below(train_.vocabulary.size - 2));
    };
    ids(b.slot("source"), false);
    Tensor& lengths = b.slot("source_lengths");
    lengths = Tensor::empty({n}, DType::i32);
    std::fill_n(lengths.data<int32_t>(), n, static_cast<int32_t>(len));
    ids(b.slot("target_input"), true);
    ids(b.slot("target"), false);
    fill_column(b, kStepTokens, n, n * len);
    fill_column(b, kStepRanks, n, 1);
    return b;
  }

  // The real target tokens (not padding), end of sentence included, as the step's tokens count.
  int64_t batch_work(const Batch& batch) const override {
    const Tensor& target = batch.at("target");
    const int32_t* ids = target.data<int32_t>();
    return std::count_if(ids, ids + target.numel(), [](int32_t id) { return id != text::kPadId; });
  }
  int64_t train_work() const override { return train_.pairs.target_offsets.back(); }

  std::unique_ptr<models::Network> make_network(uint64_t seed) const override {
    auto model =
        std::make_unique<models::Transformer>(models::transformer_config(cfg_.model), train_.vocabulary.size, seed);
    model->initialize(seed);
    return model;
  }
  std::string describe_shape() const override {
    return "a vocabulary of " + std::to_string(train_.vocabulary.size) + " subtokens";
  }
  Json describe_network(models::Network& network) const override {
    const models::TransformerConfig& c = transformer(network).config();
    Json d = Json::object();
    d.set("model", network.name());
    d.set("task", name());
    d.set("parameters", network.params().parameter_count());
    d.set("vocab_size", train_.vocabulary.size);
    d.set("width", c.width);
    d.set("heads", c.heads);
    d.set("feed_forward", c.inner);
    d.set("layers", c.layers);
    d.set("tensors", models::describe_tensors(network.params()));
    return d;
  }
  ops::OpNames ops(bool training) const override {
    ops::OpNames all = models::model_ops(cfg_.model, training);
    if (training) all.insert("token_cross_entropy");
    return all;
  }
  void check_fits(const checkpoint::CheckpointData& data) const override {
    const auto it = data.tensors.find("model/embedding.weight");
    if (it == data.tensors.end()) return;  // restore_model names what is missing
    ST_CHECK(it->second.ndim() == 2 && it->second.dim(0) == train_.vocabulary.size,
             "dataset " << cfg_.data_dir << " has a vocabulary of " << train_.vocabulary.size
                        << " subtokens but model/embedding.weight in checkpoint " << data.path << " has "
                        << (it->second.ndim() == 2 ? it->second.dim(0) : -1) << " rows");
  }

  double forward_and_loss(Context& ctx, models::Network& network, const Batch& batch) override {
    const Tensor& source = on_context_device(ctx, batch.at("source"), device_source_);
    const Tensor& lengths = on_context_device(ctx, batch.at("source_lengths"), device_lengths_);
    const Tensor& target_input = on_context_device(ctx, batch.at("target_input"), device_target_input_);
    const Tensor flat_target = batch.at("target").reshape({batch.at("target").numel()});
    const Tensor& labels = on_context_device(ctx, flat_target, device_target_);
    const Tensor logits = transformer(network).forward(ctx, source, lengths, target_input, true);
    if (!dlogits_.defined() || dlogits_.shape() != logits.shape() || dlogits_.device() != ctx.device())
      dlogits_ = Tensor::empty(logits.shape(), DType::f32, ctx.device());
    const double step_tokens = static_cast<double>(batch.at(kStepTokens).data<int64_t>()[0]);
    const double normaliser = step_tokens / static_cast<double>(batch.at(kStepRanks).data<int64_t>()[0]);
    const ops::TokenLoss loss = ops::token_cross_entropy(ctx, logits, labels, static_cast<float>(cfg_.label_smoothing),
                                                         text::kPadId, normaliser / loss_scale(), dlogits_);
    return loss.tokens > 0 ? loss.sum / static_cast<double>(loss.tokens) : 0.0;
  }
  void backward(Context& ctx, models::Network& network) override { transformer(network).backward(ctx, dlogits_); }

  // The evaluation split in contiguous ranges over the ranks, translated (translate_sources()),
  // gathered in the split's order on every rank and scored with the reference's BLEU.
  Evaluation evaluate(const comm::Communicator& comm, Context& ctx, models::Network& network, int64_t /*batch_size*/,
                      int /*ranks_on_node*/) const override {
    require_files(val_.dir, "evaluation");
    std::vector<std::string> hypotheses = translate_split(comm, ctx, network);
    const text::BleuScore score = bleu_of(hypotheses);
    Evaluation e;
    e.quality = score.bleu;
    e.loss = std::numeric_limits<double>::quiet_NaN();
    e.metrics.set("bleu", score.bleu);
    e.samples = val_.pairs.size();
    e.mlperf_scale = 0.01;  // MLPerf's eval_accuracy is BLEU / 100 (the checker's target 0.25)
    e.translations = std::move(hypotheses);
    return e;
  }

  Prediction predict(Context&, models::Network&, const std::string&, const std::string&, int64_t) const override {
    ST_THROW(
        "scaletrain predict writes logits of images or (user, item) pairs; a translation model translates "
        "text instead: scaletrain translate --model "
        << cfg_.model << " (a file of sentences), or scaletrain eval --model " << cfg_.model
        << " --translations FILE (the evaluation split)");
  }

  std::string describe_evaluation(const Evaluation& e, const std::string& where) const override {
    char line[160];
    std::snprintf(line, sizeof line, "BLEU %.2f (uncased, MLPerf's compute_bleu; %s) on %s (%lld sentences)", e.quality,
                  describe_decoding().c_str(), where.c_str(), static_cast<long long>(e.samples));
    return line;
  }

 private:
  std::vector<std::string> translate_split(const comm::Communicator& comm, Context& ctx,
                                           models::Network& network) const {
    const text::SubwordTokenizer tokenizer = text::SubwordTokenizer::from_text(val_.vocabulary.text, val_.dir);
    const data::SentencePairs& p = val_.pairs;
    std::vector<std::vector<int32_t>> sources;
    for (int64_t i = 0; i < p.size(); ++i) sources.emplace_back(p.source(i), p.source(i) + p.source_length(i));
    return translate_sources(cfg_, comm, ctx, network, tokenizer, sources);
  }

  std::string describe_decoding() const {
    if (cfg_.beam_size == 1) return "greedy decoding";
    char text[64];
    std::snprintf(text, sizeof text, "beam search %d, alpha %g", cfg_.beam_size, cfg_.length_penalty);
    return text;
  }

  // The references are the evaluation split's targets, decoded (the tokenizer is lossless).
  text::BleuScore bleu_of(const std::vector<std::string>& hypotheses) const {
    const text::SubwordTokenizer tokenizer = text::SubwordTokenizer::from_text(val_.vocabulary.text, val_.dir);
    text::BleuText hyp{"translations", {}}, ref{val_.dir + " targets", {}};
    for (int64_t i = 0; i < val_.pairs.size(); ++i) {
      hyp.lines.push_back(text::utf8_decode(hypotheses[i], "translation " + std::to_string(i)));
      ref.lines.push_back(text::utf8_decode(
          tokenizer.decode(sentence_ids(val_.pairs.target(i), val_.pairs.target_length(i))), ref.name));
    }
    return text::bleu_score(hyp, ref, false);
  }

  const TrainConfig& cfg_;
  data::TranslationSplit train_, val_;
  Tensor dlogits_;
  Tensor device_source_, device_lengths_, device_target_input_, device_target_;
};

}  // namespace

std::vector<std::string> translate_lines(const TrainConfig& config, const comm::Communicator& comm, Context& ctx,
                                         models::Network& network, const text::SubwordTokenizer& tokenizer,
                                         const std::vector<std::string>& lines, const std::string& where) {
  std::vector<std::vector<int32_t>> sources;
  sources.reserve(lines.size());
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string line_where = where + " line " + std::to_string(i + 1);
    sources.push_back(tokenizer.encode(text::strip(text::utf8_decode(lines[i], line_where)), true));
  }
  return translate_sources(config, comm, ctx, network, tokenizer, sources);
}

std::unique_ptr<Task> open_translation_task(const TrainConfig& config, const comm::Communicator&) {
  return std::make_unique<Translation>(config);
}

// A vocabulary of shape.num_items subtokens (the shape's one number for this task), no sentences.
std::unique_ptr<Task> translation_of_shape(const TrainConfig& config, const DataShape& shape) {
  ST_CHECK(shape.num_items >= 3, "internal: a translation dataset of " << shape.num_items << " subtokens");
  data::TranslationSplit split;
  split.vocabulary.size = shape.num_items;
  split.vocabulary.tokenizer = text::kSubwordTokenizerName;
  return std::make_unique<Translation>(config, split, split);
}

DataShape translation_shape_of(const TrainConfig&, const checkpoint::CheckpointData& data) {
  DataShape shape;
  shape.num_items = checkpoint_tensor_shape(data, "model/embedding.weight", {"subtokens", "width"})[0];
  return shape;
}

std::unique_ptr<Task> translation_for_evaluation(const TrainConfig& config, const std::string& split) {
  data::TranslationSplit val = data::open_translation_split(config.data_dir, split);
  data::TranslationSplit vocabulary_only;
  vocabulary_only.vocabulary = val.vocabulary;
  return std::make_unique<Translation>(config, std::move(vocabulary_only), std::move(val));
}

}  // namespace scaletrain::train
