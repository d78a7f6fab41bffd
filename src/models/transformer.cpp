// The MLPerf Transformer (include/scaletrain/models/transformer.hpp): the encoder and decoder
// layers as pre-norm residual blocks over nn/attention.hpp's blocks, the shared embedding with
// its scaled, masked, position-added lookup, and the tied pre-softmax projection.
#include "scaletrain/models/transformer.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "scaletrain/core/error.hpp"
#include "scaletrain/ops/activation.hpp"
#include "scaletrain/ops/batched_matmul.hpp"
#include "scaletrain/ops/cast.hpp"
#include "scaletrain/ops/embedding.hpp"
#include "scaletrain/ops/swap_axes.hpp"
#include "scaletrain/ops/token_embedding.hpp"

namespace scaletrain::models {

using nn::reuse_activation;
using nn::reuse_buffer;

TransformerConfig transformer_config(const std::string& model) {
  // model_params.py: big and base; tiny: small enough to learn a toy task in a minute on a CPU.
  if (model == "transformer") return {model, 1024, 16, 4096, 6, 0.1};
  if (model == "transformer-base") return {model, 512, 8, 2048, 6, 0.1};
  if (model == "transformer-tiny") return {model, 128, 4, 512, 2, 0.1};
  ST_THROW("unknown Transformer '" << model << "' (known: transformer, transformer-base, transformer-tiny)");
}

// x + dropout(sublayer(norm(x))): the reference's PrePostProcessingWrapper, in pieces each layer
// strings together; `sum` is the residual stream's next value.
namespace {

Tensor residual_add(Context& ctx, const Tensor& x, const Tensor& branch, Tensor& buffer) {
  Tensor y = reuse_activation(buffer, x.shape(), ctx);
  ops::add_forward(ctx, x, branch, y);
  return y;
}

}  // namespace

struct Transformer::EncoderLayer {
  nn::LayerNorm norm1;
  nn::MultiheadAttention self_attn;
  nn::Dropout drop1;
  nn::LayerNorm norm2;
  nn::FeedForward ffn;
  nn::Dropout drop2;
  Tensor sum1_buffer, sum2_buffer;

  EncoderLayer(nn::ParameterSet& p, const std::string& prefix, const TransformerConfig& c,
               const std::shared_ptr<nn::RandomStream>& s)
      : norm1(p, prefix + "norm1", c.width),
        self_attn(p, prefix + "self_attn", c.width, c.heads, s, c.dropout),
        drop1(s, c.dropout),
        norm2(p, prefix + "norm2", c.width),
        ffn(p, prefix, c.width, c.inner, s, c.dropout),
        drop2(s, c.dropout) {}

  Tensor forward(Context& ctx, const Tensor& x, const nn::AttentionShape& shape, const Tensor& lengths, bool training) {
    const Tensor h = norm1.forward(ctx, x, training);
    const Tensor a = drop1.forward(ctx, self_attn.forward(ctx, h, h, shape, lengths, false, training), training);
    const Tensor x1 = residual_add(ctx, x, a, sum1_buffer);
    const Tensor f = drop2.forward(ctx, ffn.forward(ctx, norm2.forward(ctx, x1, training), training), training);
    return residual_add(ctx, x1, f, sum2_buffer);
  }

  Tensor backward(Context& ctx, const Tensor& dy) {
    Tensor dx1 = norm2.backward(ctx, ffn.backward(ctx, drop2.backward(ctx, dy)));
    ops::add_inplace(ctx, dx1, dy);
    Tensor dx = norm1.backward(ctx, self_attn.backward(ctx, drop1.backward(ctx, dx1)));
    ops::add_inplace(ctx, dx, dx1);
    return dx;
  }

  void initialize(Rng& rng) {
    norm1.initialize(rng);
    self_attn.initialize(rng);
    norm2.initialize(rng);
    ffn.initialize(rng);
  }

  void list_ops(ops::OpNames& ops, bool training) const {
    norm1.list_ops(ops, training);
    self_attn.list_ops(ops, training);
    drop1.list_ops(ops, training);
    ffn.list_ops(ops, training);
    ops.insert("add_forward");
  }
};

struct Transformer::DecoderLayer {
  nn::LayerNorm norm1;
  nn::MultiheadAttention self_attn;
  nn::Dropout drop1;
  nn::LayerNorm norm2;
  nn::MultiheadAttention cross_attn;  // PyTorch's multihead_attn
  nn::Dropout drop2;
  nn::LayerNorm norm3;
  nn::FeedForward ffn;
  nn::Dropout drop3;
  Tensor sum1_buffer, sum2_buffer, sum3_buffer;

  DecoderLayer(nn::ParameterSet& p, const std::string& prefix, const TransformerConfig& c,
               const std::shared_ptr<nn::RandomStream>& s)
      : norm1(p, prefix + "norm1", c.width),
        self_attn(p, prefix + "self_attn", c.width, c.heads, s, c.dropout),
        drop1(s, c.dropout),
        norm2(p, prefix + "norm2", c.width),
        cross_attn(p, prefix + "multihead_attn", c.width, c.heads, s, c.dropout),
        drop2(s, c.dropout),
        norm3(p, prefix + "norm3", c.width),
        ffn(p, prefix, c.width, c.inner, s, c.dropout),
        drop3(s, c.dropout) {}

  Tensor forward(Context& ctx, const Tensor& y, const Tensor& memory, const nn::AttentionShape& self_shape,
                 const Tensor& target_lengths, const nn::AttentionShape& cross_shape, const Tensor& source_lengths,
                 bool training) {
    const Tensor h1 = norm1.forward(ctx, y, training);
    const Tensor a1 =
        drop1.forward(ctx, self_attn.forward(ctx, h1, h1, self_shape, target_lengths, true, training), training);
    const Tensor y1 = residual_add(ctx, y, a1, sum1_buffer);
    const Tensor h2 = norm2.forward(ctx, y1, training);
    const Tensor a2 =
        drop2.forward(ctx, cross_attn.forward(ctx, h2, memory, cross_shape, source_lengths, false, training), training);
    const Tensor y2 = residual_add(ctx, y1, a2, sum2_buffer);
    const Tensor f = drop3.forward(ctx, ffn.forward(ctx, norm3.forward(ctx, y2, training), training), training);
    return residual_add(ctx, y2, f, sum3_buffer);
  }

  // Returns the gradient of y; the memory's is cross_attn.memory_gradient().
  Tensor backward(Context& ctx, const Tensor& dy) {
    Tensor dy2 = norm3.backward(ctx, ffn.backward(ctx, drop3.backward(ctx, dy)));
    ops::add_inplace(ctx, dy2, dy);
    Tensor dy1 = norm2.backward(ctx, cross_attn.backward(ctx, drop2.backward(ctx, dy2)));
    ops::add_inplace(ctx, dy1, dy2);
    Tensor dx = norm1.backward(ctx, self_attn.backward(ctx, drop1.backward(ctx, dy1)));
    ops::add_inplace(ctx, dx, dy1);
    return dx;
  }

  void initialize(Rng& rng) {
    norm1.initialize(rng);
    self_attn.initialize(rng);
    norm2.initialize(rng);
    cross_attn.initialize(rng);
    norm3.initialize(rng);
    ffn.initialize(rng);
  }

  void list_ops(ops::OpNames& ops, bool training) const {
    norm1.list_ops(ops, training);
    self_attn.list_ops(ops, training);
    drop1.list_ops(ops, training);
    ffn.list_ops(ops, training);
    ops.insert("add_forward");
  }
};

// One side's embedded input: the ids, the looked-up rows, the dropout after the position signal.
struct Transformer::Embedded {
  nn::Dropout dropout;
  Tensor ids, rows_buffer, drows_buffer;
  explicit Embedded(const std::shared_ptr<nn::RandomStream>& s, double p) : dropout(s, p) {}
};

Transformer::Transformer(const TransformerConfig& c, int64_t vocab, uint64_t seed)
    : config_(c), vocab_(vocab), stream_(std::make_shared<nn::RandomStream>(seed)) {
  ST_CHECK(vocab >= 3,
           name() << ": a vocabulary of " << vocab << " ids (at least padding, end of sentence and one more)");
  ST_CHECK(c.width % 2 == 0 && c.width >= 4, name() << ": the width must be even (sines and cosines), got " << c.width);
  // Registered in forward order (the gradient buckets' contract): E first, whose gradient is
  // complete last.
  embedding_ = params_.add_parameter("embedding.weight", {vocab, c.width});
  source_embedded_ = std::make_unique<Embedded>(stream_, c.dropout);
  for (int i = 0; i < c.layers; ++i)
    encoder_.push_back(
        std::make_unique<EncoderLayer>(params_, "encoder.layers." + std::to_string(i) + ".", c, stream_));
  encoder_norm_ = std::make_unique<nn::LayerNorm>(params_, "encoder.norm", c.width);
  target_embedded_ = std::make_unique<Embedded>(stream_, c.dropout);
  for (int i = 0; i < c.layers; ++i)
    decoder_.push_back(
        std::make_unique<DecoderLayer>(params_, "decoder.layers." + std::to_string(i) + ".", c, stream_));
  decoder_norm_ = std::make_unique<nn::LayerNorm>(params_, "decoder.norm", c.width);
  params_.finalize();
}

Transformer::~Transformer() = default;

std::vector<float> Transformer::position_signal(int64_t length, int width) {
  const int half = width / 2;
  const double increment = std::log(1.0e4) / std::max(half - 1, 1);
  std::vector<float> signal(static_cast<std::size_t>(length * width));
  for (int64_t pos = 0; pos < length; ++pos)
    for (int i = 0; i < half; ++i) {
      const double angle = static_cast<double>(pos) * std::exp(-static_cast<double>(i) * increment);
      signal[pos * width + i] = static_cast<float>(std::sin(angle));
      signal[pos * width + half + i] = static_cast<float>(std::cos(angle));
    }
  return signal;
}

const Tensor& Transformer::positions(Context& ctx, int64_t length) {
  if (!positions_.defined() || positions_.dim(0) < length || positions_.device() != ctx.device()) {
    // Grown in steps of 64 so that a run computes the table a few times at most.
    const int64_t rows = std::max<int64_t>(64, (length + 63) / 64 * 64);
    const std::vector<float> signal = position_signal(rows, config_.width);
    Tensor host = Tensor::empty({rows, config_.width});
    std::copy(signal.begin(), signal.end(), host.data<float>());
    positions_ = host.to(ctx.device());
  }
  return positions_;
}

Tensor Transformer::embed(Context& ctx, const Tensor& ids, Embedded& e, bool training) {
  const int64_t n = ids.dim(0), l = ids.dim(1), d = config_.width;
  e.ids = ids;
  Tensor rows = reuse_activation(e.rows_buffer, {n, l, d}, ctx);
  Tensor flat_rows = rows.reshape({n * l, d});
  ops::embedding_forward(ctx, params_.value(embedding_), ids.reshape({n * l}), flat_rows);
  const float scale = static_cast<float>(std::sqrt(static_cast<double>(d)));
  ops::token_embedding_forward(ctx, rows, ids, scale, positions(ctx, l), rows);
  return e.dropout.forward(ctx, flat_rows, training);
}

// dy: (N * L, D) of the dropped-out embedding. Adds E's gradient of this lookup to grad(E)
// (the projection's was written first).
void Transformer::embed_backward(Context& ctx, Embedded& e, const Tensor& dy) {
  const int64_t n = e.ids.dim(0), l = e.ids.dim(1), d = config_.width;
  const float scale = static_cast<float>(std::sqrt(static_cast<double>(d)));
  const Tensor dropped = e.dropout.backward(ctx, dy);
  Tensor drows = reuse_activation(e.drows_buffer, {n, l, d}, ctx);
  ops::token_embedding_backward(ctx, e.ids, scale, dropped.reshape({n, l, d}), drows);
  Tensor dtable = reuse_buffer(dtable_buffer_, {vocab_, d}, ctx.device());  // a weight gradient: fp32
  ops::embedding_backward(ctx, e.ids.reshape({n * l}), drows.reshape({n * l, d}), dtable);
  ops::add_inplace(ctx, params_.grad(embedding_), dtable);
}

Tensor Transformer::forward(Context& ctx, const Tensor& source, const Tensor& source_lengths,
                            const Tensor& target_input, bool training) {
  ST_CHECK(target_input.ndim() == 2 && source.ndim() == 2 && source.dim(0) == target_input.dim(0),
           name() << ": source " << shape_string(source.shape()) << " and target " << shape_string(target_input.shape())
                  << " must be (N, Ls) and (N, Lt)");
  encode(ctx, source, source_lengths, training);
  return decode(ctx, target_input, training);
}

void Transformer::encode(Context& ctx, const Tensor& source, const Tensor& source_lengths, bool training) {
  ST_CHECK(source.ndim() == 2 && source_lengths.shape() == (Shape{source.dim(0)}),
           name() << ": source " << shape_string(source.shape()) << " and its lengths "
                  << shape_string(source_lengths.shape()) << " must be (N, Ls) and (N)");
  n_ = source.dim(0), ls_ = source.dim(1);
  source_lengths_ = source_lengths;
  Tensor x = embed(ctx, source, *source_embedded_, training);
  const nn::AttentionShape enc{n_, ls_, ls_};
  for (auto& layer : encoder_) x = layer->forward(ctx, x, enc, source_lengths, training);
  memory_ = encoder_norm_->forward(ctx, x, training);
}

Tensor Transformer::decode(Context& ctx, const Tensor& target_input, bool training) {
  ST_CHECK(memory_.defined() && target_input.ndim() == 2 && target_input.dim(0) == n_,
           name() << ": decode needs encode() of the same " << n_ << " sentences first, got target "
                  << shape_string(target_input.shape()));
  lt_ = target_input.dim(1);
  // Decoder self-attention: every key position of the padded target (only the causal mask).
  if (!target_lengths_.defined() || target_lengths_.dim(0) != n_ || target_lengths_.device() != ctx.device() ||
      target_lengths_buffer_.data<int32_t>()[0] != lt_) {
    target_lengths_buffer_ = Tensor::empty({n_}, DType::i32);
    std::fill_n(target_lengths_buffer_.data<int32_t>(), n_, static_cast<int32_t>(lt_));
    target_lengths_ = target_lengths_buffer_.to(ctx.device());
  }
  Tensor y = embed(ctx, target_input, *target_embedded_, training);
  const nn::AttentionShape self{n_, lt_, lt_}, cross{n_, lt_, ls_};
  for (auto& layer : decoder_)
    y = layer->forward(ctx, y, memory_, self, target_lengths_, cross, source_lengths_, training);
  out_ = decoder_norm_->forward(ctx, y, training);
  // logits = out E^T: one product of the batch's tokens with the whole vocabulary.
  Tensor logits = reuse_activation(logits_buffer_, {n_ * lt_, vocab_}, ctx);
  Tensor logits_3d = logits.reshape({1, n_ * lt_, vocab_});
  ops::batched_matmul(ctx, {false, true, 1.0f}, out_.reshape({1, n_ * lt_, config_.width}),
                      params_.value(embedding_).reshape({1, vocab_, config_.width}), logits_3d);
  return logits;
}

// ---- decoding ----

namespace {

constexpr int32_t kEos = 1;  // the reference's EOS_ID (text/subword_tokenizer.hpp's kEosId)

Tensor upload_i32(const std::vector<int32_t>& values, Device device) {
  Tensor host = Tensor::empty({static_cast<int64_t>(values.size())}, DType::i32);
  std::copy(values.begin(), values.end(), host.data<int32_t>());
  return host.to(device);
}

// Each sentence's max_decode_length: its source's length + max_extra.
std::vector<int64_t> max_decode_lengths(const Tensor& source_lengths, int64_t max_extra) {
  const Tensor lengths = source_lengths.to(Device::cpu);
  std::vector<int64_t> out;
  for (int64_t i = 0; i < lengths.numel(); ++i) out.push_back(lengths.data<int32_t>()[i] + max_extra);
  return out;
}

}  // namespace

// One decoder layer's cache: the self-attention's keys and values position-major, (positions,
// rows, D), so that a step's new position is one contiguous block its projection writes in
// place; the encoder-decoder attention's in heads layout (sentences * H, Ls, D / H), once per
// sentence (its beams' queries go against them together).
struct IncrementalDecoder::LayerCache {
  Tensor keys, values, cross_keys, cross_values;
  nn::AttentionScratch self_scratch, cross_scratch;
  Tensor sum1_buffer, sum2_buffer, sum3_buffer;
};

IncrementalDecoder::IncrementalDecoder(Context& ctx, Transformer& model, const Tensor& source,
                                       const Tensor& source_lengths, int64_t beams, int64_t max_positions)
    : ctx_(ctx),
      model_(model),
      beams_(beams),
      capacity_(max_positions),
      rows_(source.dim(0) * beams),
      sentences_(source.dim(0)),
      source_length_(source.dim(1)) {
  ST_CHECK(beams >= 1 && max_positions >= 1, model.name()
                                                 << ": incremental decoding needs at least 1 beam and 1 position, got "
                                                 << beams << " and " << max_positions);
  const Device dev = ctx.device();
  model.encode(ctx, source.to(dev), source_lengths.to(dev), false);
  const Tensor host_lengths = source_lengths.to(Device::cpu);
  source_lengths_host_.assign(host_lengths.data<int32_t>(), host_lengths.data<int32_t>() + sentences_);
  source_lengths_ = upload_i32(source_lengths_host_, dev);
  positions_ = model.positions(ctx, capacity_);
  const int64_t d = model.config_.width, heads = model.config_.heads, n = sentences_, ls = source_length_;
  const int64_t cross_elements = n * ls * d;
  Tensor projected = Tensor::empty({n * ls, d}, DType::f32, dev);
  for (auto& layer : model.decoder_) {
    auto c = std::make_unique<LayerCache>();
    for (auto [which, target] : {std::pair<int, Tensor*>{1, &c->cross_keys}, {2, &c->cross_values}}) {
      layer->cross_attn.project(ctx, model.memory_, which, projected);
      *target = Tensor::empty({cross_elements}, DType::f32, dev);
      Tensor heads_view = target->reshape({n, heads, ls, d / heads});
      ops::swap_middle_axes(ctx, projected.reshape({n, ls, heads, d / heads}), heads_view);
    }
    layers_.push_back(std::move(c));
  }
  cross_scratch_ = Tensor::empty({cross_elements}, DType::f32, dev);
}

// Room for `positions` positions of the current rows in every self-attention cache. Most searches
// end long before max_positions, so the caches start small and double: the copies add up to less
// than one cache's final size.
void IncrementalDecoder::reserve_positions(int64_t positions) {
  if (positions <= reserved_) return;
  const int64_t d = model_.config_.width, keep = position_ * rows_ * d;
  reserved_ = std::min(capacity_, std::max(positions, 2 * reserved_));
  const Shape shape{reserved_ * rows_ * d};
  for (auto& c : layers_)
    for (Tensor* cache : {&c->keys, &c->values}) {
      Tensor grown = Tensor::empty(shape, DType::f32, ctx_.device());
      if (keep > 0) Tensor::view_of(grown, 0, {keep}).copy_from(Tensor::view_of(*cache, 0, {keep}));
      *cache = grown;
    }
  self_scratch_ = Tensor::empty(shape, DType::f32, ctx_.device());
}

IncrementalDecoder::~IncrementalDecoder() = default;

// The new tokens' input rows (M, D): scaled embedding, zero for id 0 (the start), plus the
// position signal of this step's position (the reference's timing_signal[i:i + 1]).
Tensor IncrementalDecoder::embed_step(const std::vector<int32_t>& last_ids) {
  const int64_t m = rows_, d = model_.config_.width;
  const Tensor ids = upload_i32(last_ids, ctx_.device());
  Tensor rows = nn::reuse_activation(rows_buffer_, {m, d}, ctx_);
  ops::embedding_forward(ctx_, model_.params_.value(model_.embedding_), ids, rows);
  const float scale = static_cast<float>(std::sqrt(static_cast<double>(d)));
  Tensor rows_3d = rows.reshape({m, 1, d});
  ops::token_embedding_forward(ctx_, rows_3d, ids.reshape({m, 1}), scale,
                               Tensor::view_of(positions_, position_ * d, {1, d}), rows_3d);
  return rows;
}

// The cache's first position() + 1 positions (position-major, (L, M * H, D / H)) as the heads'
// matrices (M * H, L, D / H) that the batched products take.
Tensor IncrementalDecoder::heads_of_cache(const Tensor& cache, Tensor& buffer) {
  const int64_t l = position_ + 1, heads = model_.config_.heads, dh = model_.config_.width / heads;
  Tensor h = nn::reuse_activation(buffer, {1, rows_ * heads, l, dh}, ctx_);
  ops::swap_middle_axes(ctx_, Tensor::view_of(cache, 0, {1, l, rows_ * heads, dh}), h);
  return h.reshape({rows_ * heads, l, dh});
}

// DecoderLayer::forward for one position: the same blocks, the keys and values from the cache.
Tensor IncrementalDecoder::layer_step(Transformer::DecoderLayer& l, LayerCache& c, const Tensor& y) {
  const int64_t m = rows_, d = model_.config_.width, heads = model_.config_.heads;
  const Tensor h1 = l.norm1.forward(ctx_, y, false);
  for (auto [which, cache] : {std::pair<int, Tensor*>{1, &c.keys}, {2, &c.values}}) {
    Tensor at = Tensor::view_of(*cache, position_ * m * d, {m, d});
    l.self_attn.project(ctx_, h1, which, at);
  }
  const Tensor kh = heads_of_cache(c.keys, keys_heads_), vh = heads_of_cache(c.values, values_heads_);
  const Tensor a1 = l.self_attn.attend(ctx_, h1, kh, vh, {m, 1, position_ + 1}, self_lengths_, c.self_scratch);
  const Tensor y1 = residual_add(ctx_, y, a1, c.sum1_buffer);
  const Tensor h2 = l.norm2.forward(ctx_, y1, false);
  const Shape cross_shape{sentences_ * heads, source_length_, d / heads};
  const Tensor a2 = l.cross_attn.attend(ctx_, h2, Tensor::view_of(c.cross_keys, 0, cross_shape),
                                        Tensor::view_of(c.cross_values, 0, cross_shape),
                                        {sentences_, beams_, source_length_}, source_lengths_, c.cross_scratch);
  const Tensor y2 = residual_add(ctx_, y1, a2, c.sum2_buffer);
  const Tensor f = l.ffn.forward(ctx_, l.norm3.forward(ctx_, y2, false), false);
  return residual_add(ctx_, y2, f, c.sum3_buffer);
}

Tensor IncrementalDecoder::step(const std::vector<int32_t>& last_ids) {
  ST_CHECK(static_cast<int64_t>(last_ids.size()) == rows_ && position_ < capacity_,
           model_.name() << ": decoding step " << position_ << " with " << last_ids.size() << " ids for " << rows_
                         << " rows (at most " << capacity_ << " steps)");
  // Every row sees the positions so far, its own included (no causal mask: the cache holds no later one).
  reserve_positions(std::max<int64_t>(position_ + 1, 16));
  self_lengths_ = upload_i32(std::vector<int32_t>(rows_, static_cast<int32_t>(position_ + 1)), ctx_.device());
  Tensor y = embed_step(last_ids);
  for (std::size_t i = 0; i < layers_.size(); ++i) y = layer_step(*model_.decoder_[i], *layers_[i], y);
  const Tensor out = model_.decoder_norm_->forward(ctx_, y, false);
  const int64_t v = model_.vocab_, d = model_.config_.width;
  Tensor logits = nn::reuse_activation(logits_buffer_, {rows_, v}, ctx_);
  Tensor logits_3d = logits.reshape({1, rows_, v});
  ops::batched_matmul(ctx_, {false, true, 1.0f}, out.reshape({1, rows_, d}),
                      model_.params_.value(model_.embedding_).reshape({1, v, d}), logits_3d);
  ++position_;
  return logits;
}

// buffer's first `rows` rows of `width` become rows indices[0], indices[1], ... (the embedding
// lookup is a row gather on any device), written to scratch, which then takes buffer's place.
void IncrementalDecoder::gather_rows(Tensor& buffer, Tensor& scratch, int64_t rows, int64_t width,
                                     const Tensor& indices, int64_t new_rows) {
  Tensor out = Tensor::view_of(scratch, 0, {new_rows, width});
  ops::embedding_forward(ctx_, Tensor::view_of(buffer, 0, {rows, width}), indices, out);
  std::swap(buffer, scratch);
}

void IncrementalDecoder::keep_rows(const std::vector<int64_t>& origins) {
  const int64_t m = rows_, kept_rows = static_cast<int64_t>(origins.size()), kept = kept_rows / beams_;
  ST_CHECK(kept_rows % beams_ == 0 && kept_rows <= m, model_.name()
                                                          << ": keep_rows: " << kept_rows << " rows of " << m
                                                          << ", not whole sentences of " << beams_ << " beams");
  std::vector<int32_t> sentences;  // each new sentence's old one
  bool same = kept_rows == m;
  for (int64_t r = 0; r < kept_rows; ++r) {
    const int64_t origin = origins[r], sentence = origin / beams_;
    ST_CHECK(origin >= 0 && origin < m && sentence == origins[r - r % beams_] / beams_,
             model_.name() << ": keep_rows: row " << r << " from row " << origin << " of " << m
                           << " (a sentence's rows come from one sentence's)");
    if (r % beams_ == 0) sentences.push_back(static_cast<int32_t>(sentence));
    same = same && origin == r;
  }
  if (same) return;
  const Device dev = ctx_.device();
  const int64_t d = model_.config_.width;
  if (position_ > 0) {
    std::vector<int32_t> indices;
    for (int64_t p = 0; p < position_; ++p)
      for (int64_t r = 0; r < kept_rows; ++r) indices.push_back(static_cast<int32_t>(p * m + origins[r]));
    const Tensor device_indices = upload_i32(indices, dev);
    for (auto& c : layers_) {
      gather_rows(c->keys, self_scratch_, position_ * m, d, device_indices, position_ * kept_rows);
      gather_rows(c->values, self_scratch_, position_ * m, d, device_indices, position_ * kept_rows);
    }
  }
  bool same_sentences = kept == sentences_;
  for (int64_t s = 0; s < kept; ++s) same_sentences = same_sentences && sentences[s] == s;
  if (!same_sentences) {
    const Tensor device_sentences = upload_i32(sentences, dev);
    for (auto& c : layers_) {
      gather_rows(c->cross_keys, cross_scratch_, sentences_, source_length_ * d, device_sentences, kept);
      gather_rows(c->cross_values, cross_scratch_, sentences_, source_length_ * d, device_sentences, kept);
    }
    std::vector<int32_t> lengths;
    for (int32_t s : sentences) lengths.push_back(source_lengths_host_[s]);
    source_lengths_host_.swap(lengths);
    source_lengths_ = upload_i32(source_lengths_host_, dev);
  }
  rows_ = kept_rows;
  sentences_ = kept;
}

std::vector<std::vector<int32_t>> Transformer::translate_greedy(Context& ctx, const Tensor& source,
                                                                const Tensor& source_lengths, int64_t max_extra) {
  const std::vector<int64_t> limits = max_decode_lengths(source_lengths, max_extra);
  if (limits.empty()) return {};
  IncrementalDecoder decoder(ctx, *this, source, source_lengths, 1, *std::max_element(limits.begin(), limits.end()));
  std::vector<std::vector<int32_t>> out(limits.size());
  std::vector<int64_t> live(limits.size());
  std::iota(live.begin(), live.end(), 0);
  std::vector<int32_t> last(limits.size(), 0);  // the start
  for (int64_t t = 1; !live.empty(); ++t) {
    const Tensor logits = ops::as_f32(ctx, decoder.step(last)).to(Device::cpu);
    std::vector<int64_t> keep, still_live;
    last.clear();
    for (std::size_t r = 0; r < live.size(); ++r) {
      const float* row = logits.data<float>() + static_cast<int64_t>(r) * vocab_;
      const int32_t best = static_cast<int32_t>(std::max_element(row, row + vocab_) - row);
      const int64_t i = live[r];
      if (best != kEos) out[i].push_back(best);
      if (best == kEos || t >= limits[i]) continue;
      keep.push_back(static_cast<int64_t>(r));
      still_live.push_back(i);
      last.push_back(best);
    }
    if (!still_live.empty() && still_live.size() != live.size()) decoder.keep_rows(keep);
    live.swap(still_live);
  }
  return out;
}

namespace {

// Beam search's view of the decoder: host logits, rows kept on the device.
class CachedBeamDecoder : public BeamSearchDecoder {
 public:
  explicit CachedBeamDecoder(IncrementalDecoder& decoder) : decoder_(decoder) {}
  Tensor next_logits(const std::vector<int32_t>& last_ids) override {
    return ops::as_f32(decoder_.context(), decoder_.step(last_ids)).to(Device::cpu);
  }
  void keep_rows(const std::vector<int64_t>& origins) override { decoder_.keep_rows(origins); }

 private:
  IncrementalDecoder& decoder_;
};

}  // namespace

std::vector<BeamSearchResult> Transformer::translate_beam(Context& ctx, const Tensor& source,
                                                          const Tensor& source_lengths, int64_t beam_size, double alpha,
                                                          int64_t max_extra) {
  const std::vector<int64_t> limits = max_decode_lengths(source_lengths, max_extra);
  if (limits.empty()) return {};
  IncrementalDecoder decoder(ctx, *this, source, source_lengths, beam_size,
                             *std::max_element(limits.begin(), limits.end()));
  CachedBeamDecoder view(decoder);
  return beam_search(view, limits, {beam_size, alpha, kEos});
}

void Transformer::backward(Context& ctx, const Tensor& dlogits) {
  ST_CHECK(out_.defined() && dlogits.shape() == (Shape{n_ * lt_, vocab_}),
           name() << ": backward needs the gradient of the last forward's logits (" << n_ * lt_ << " x " << vocab_
                  << "), got " << shape_string(dlogits.shape()));
  const int64_t t = n_ * lt_, d = config_.width;
  const Tensor dl = dlogits.reshape({1, t, vocab_});
  Tensor dout = reuse_activation(dout_buffer_, {t, d}, ctx);
  Tensor dout_3d = dout.reshape({1, t, d});
  ops::batched_matmul(ctx, {false, false, 1.0f}, dl, params_.value(embedding_).reshape({1, vocab_, d}), dout_3d);
  // The projection's part of E's gradient first: dE = dlogits^T out (overwrites it).
  Tensor dtable_3d = params_.grad(embedding_).reshape({1, vocab_, d});
  ops::batched_matmul(ctx, {true, false, 1.0f}, dl, out_.reshape({1, t, d}), dtable_3d);
  Tensor dy = decoder_norm_->backward(ctx, dout);
  Tensor dmemory = reuse_activation(dmemory_buffer_, {n_ * ls_, d}, ctx);
  for (std::size_t i = decoder_.size(); i-- > 0;) {
    dy = decoder_[i]->backward(ctx, dy);
    const Tensor& dm = decoder_[i]->cross_attn.memory_gradient();
    if (i + 1 == decoder_.size())
      dmemory.copy_from(dm);
    else
      ops::add_inplace(ctx, dmemory, dm);
  }
  embed_backward(ctx, *target_embedded_, dy);
  Tensor dx = encoder_norm_->backward(ctx, dmemory);
  for (std::size_t i = encoder_.size(); i-- > 0;) dx = encoder_[i]->backward(ctx, dx);
  embed_backward(ctx, *source_embedded_, dx);
  params_.mark_grad_ready(embedding_);
}

void Transformer::initialize(uint64_t seed) {
  Rng rng(seed);
  const double std = 1.0 / std::sqrt(static_cast<double>(config_.width));
  Tensor& e = params_.value(embedding_);
  Tensor host = Tensor::empty(e.shape());
  for (int64_t i = 0; i < host.numel(); ++i) host.data<float>()[i] = static_cast<float>(std * rng.normal());
  e.copy_from(host);
  for (auto& layer : encoder_) layer->initialize(rng);
  encoder_norm_->initialize(rng);
  for (auto& layer : decoder_) layer->initialize(rng);
  decoder_norm_->initialize(rng);
}

ops::OpNames Transformer::ops(bool training) const {
  ops::OpNames ops{"embedding_forward", "token_embedding_forward", "batched_matmul"};
  if (training) ops.insert({"embedding_backward", "token_embedding_backward", "add_inplace"});
  source_embedded_->dropout.list_ops(ops, training);
  for (const auto& layer : encoder_) layer->list_ops(ops, training);
  encoder_norm_->list_ops(ops, training);
  for (const auto& layer : decoder_) layer->list_ops(ops, training);
  return ops;
}

void Transformer::set_random_position(int64_t global_step, int micro_batch, int rank) {
  stream_->set_position(global_step, micro_batch, rank);
}

}  // namespace scaletrain::models
