// The Transformer of MLPerf's translation benchmark (Vaswani et al. 2017), exactly the reference's
// graph (mlcommons/training, retired_benchmarks/transformer/tensorflow/transformer/model/):
//   - one embedding matrix E (V, D), N(0, D^-1/2), shared by the encoder's input, the decoder's
//     input and the pre-softmax projection (logits = h E^T, no bias); a looked-up row is scaled by
//     sqrt(D), zeroed for padding (id 0), and the sinusoidal position signal is added (all sines,
//     then all cosines, timescales 1 to 10^4 spaced by ln(10^4) / (D/2 - 1), as model_utils.py);
//   - the decoder's input is the target shifted right (id 0 first: the zero vector);
//   - 2 x `layers` pre-norm blocks x + dropout(sublayer(layer_norm(x))) (epsilon 1e-6), a final
//     layer norm in the encoder and in the decoder; attention without biases; dropout 0.1 on the
//     embeddings, after each sublayer, on the attention probabilities and after the ReLU;
//   - padding masks on the source in encoder self-attention and encoder-decoder attention, the
//     causal mask in decoder self-attention (which, as the reference's, has no padding mask: a
//     padded target position sees only earlier ones and is not in the loss).
// Parameter names and shapes are torch.nn.Transformer(norm_first=True, layer_norm_eps=1e-6)'s
// state_dict ("encoder.layers.0.self_attn.in_proj_weight", ..., "decoder.norm.bias") plus
// "embedding.weight" for E (docs/models.md shows the few lines that load it into PyTorch).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "scaletrain/backend/context.hpp"
#include "scaletrain/models/beam_search.hpp"
#include "scaletrain/models/network.hpp"
#include "scaletrain/nn/attention.hpp"
#include "scaletrain/nn/dropout.hpp"

namespace scaletrain::models {

struct TransformerConfig {
  std::string name;  // --model: transformer, transformer-base, transformer-tiny
  int width = 512;   // D, the reference's hidden_size
  int heads = 8;
  int inner = 2048;  // the feed-forward's filter_size
  int layers = 6;    // in the encoder, and as many in the decoder
  double dropout = 0.1;
};

// The reference's big (the MLPerf benchmark), base, and a tiny one for tests and the demo.
TransformerConfig transformer_config(const std::string& model);

class IncrementalDecoder;

class Transformer : public Network {
 public:
  // vocab: V, the dataset's vocabulary size. seed: the dropout stream's (nn/dropout.hpp).
  Transformer(const TransformerConfig& config, int64_t vocab, uint64_t seed = 0);
  ~Transformer() override;
  Transformer(const Transformer&) = delete;
  Transformer& operator=(const Transformer&) = delete;

  const std::string& name() const override { return config_.name; }
  nn::ParameterSet& params() override { return params_; }
  const TransformerConfig& config() const { return config_; }
  int64_t vocab() const { return vocab_; }

  // source: (N, Ls) int32 ids padded with 0 after each sentence; source_lengths: (N) int32, each
  // in [1, Ls]; target_input: (N, Lt) int32, the target shifted right (0 first). All on the
  // context's device and unchanged until backward. Returns logits (N * Lt, V), row n * Lt + t
  // predicting target token t of sentence n; owned by the model, overwritten by the next forward.
  Tensor forward(Context& ctx, const Tensor& source, const Tensor& source_lengths, const Tensor& target_input,
                 bool training);
  // dlogits: (N * Lt, V). Overwrites every parameter gradient and marks each ready (E last: it
  // sums the projection's and both lookups' gradients).
  void backward(Context& ctx, const Tensor& dlogits);

  // forward's two halves, for decoding: encode() runs the encoder on a batch and keeps its
  // output; decode() runs the decoder on target_input (N, Lt) against it and returns the logits
  // (N * Lt, V). forward() is encode() then decode().
  void encode(Context& ctx, const Tensor& source, const Tensor& source_lengths, bool training);
  Tensor decode(Context& ctx, const Tensor& target_input, bool training);

  // Translation, without dropout, on the key/value cache (IncrementalDecoder). Each sentence gets
  // at most its source's length + max_extra tokens (the reference's max_decode_length, with
  // extra_decode_length 50); the end of sentence is not returned. source and source_lengths as
  // forward's, on the CPU; the work runs on the context's device.
  // Greedy: the most probable next token, one at a time, until the end of sentence.
  std::vector<std::vector<int32_t>> translate_greedy(Context& ctx, const Tensor& source, const Tensor& source_lengths,
                                                     int64_t max_extra);
  // The reference's beam search (models/beam_search.hpp; its predict(): beam 4, alpha 0.6).
  std::vector<BeamSearchResult> translate_beam(Context& ctx, const Tensor& source, const Tensor& source_lengths,
                                               int64_t beam_size, double alpha, int64_t max_extra);

  // The reference's initialisation (glorot-uniform projections, E ~ N(0, D^-1/2), layer norms
  // 1 and 0, biases 0), seeded.
  void initialize(uint64_t seed) override;
  ops::OpNames ops(bool training) const override;
  void set_random_position(int64_t global_step, int micro_batch, int rank) override;

  // The position signal of `length` positions (length, D), float64 then rounded (model_utils.py).
  static std::vector<float> position_signal(int64_t length, int width);

 private:
  friend class IncrementalDecoder;
  struct EncoderLayer;
  struct DecoderLayer;
  struct Embedded;
  Tensor embed(Context& ctx, const Tensor& ids, Embedded& e, bool training);
  void embed_backward(Context& ctx, Embedded& e, const Tensor& dy);
  const Tensor& positions(Context& ctx, int64_t length);

  TransformerConfig config_;
  int64_t vocab_;
  nn::ParameterSet params_;
  std::shared_ptr<nn::RandomStream> stream_;
  int embedding_;
  std::vector<std::unique_ptr<EncoderLayer>> encoder_;
  std::unique_ptr<nn::LayerNorm> encoder_norm_;
  std::vector<std::unique_ptr<DecoderLayer>> decoder_;
  std::unique_ptr<nn::LayerNorm> decoder_norm_;
  std::unique_ptr<Embedded> source_embedded_, target_embedded_;
  int64_t n_ = 0, ls_ = 0, lt_ = 0;
  Tensor source_lengths_, target_lengths_, target_lengths_buffer_;
  Tensor positions_;
  Tensor memory_;
  Tensor out_, logits_buffer_, dout_buffer_, dmemory_buffer_, dtable_buffer_;
};

// Decoding one position at a time, as the reference's predict() does (transformer.py's
// symbols_to_logits_fn and the decoder stack's cache): the source is encoded once, each decoder
// layer's encoder-decoder keys and values are projected once, and its self-attention's keys and
// values of the positions decoded so far are kept, one more position each step. A step runs the
// decoder on one new token per row: the work of one position, where decode() would redo the whole
// prefix. Rows are hypotheses, `beams` of them per sentence, sentence by sentence, all at the
// start (id 0) at first; keep_rows() picks and reorders them (the reference's _gather_beams on its
// cache) and drops the sentences whose search has ended. Everything runs on the context's device
// through the op registry; only ids and row indices come from the host. The model must outlive
// the decoder; its forward and decode may run in between (the decoder keeps its own state).
class IncrementalDecoder {
 public:
  // source, source_lengths: as Transformer::forward's (on any device). max_positions: the most
  // steps the decoder will run (the longest max_decode_length).
  IncrementalDecoder(Context& ctx, Transformer& model, const Tensor& source, const Tensor& source_lengths,
                     int64_t beams, int64_t max_positions);
  ~IncrementalDecoder();
  IncrementalDecoder(const IncrementalDecoder&) = delete;
  IncrementalDecoder& operator=(const IncrementalDecoder&) = delete;

  int64_t rows() const { return rows_; }
  int64_t position() const { return position_; }  // the steps run so far
  Context& context() const { return ctx_; }

  // Feeds each row's last token (id 0, the start, at the first step), at position(); returns the
  // logits of the next token (rows, V) on the context's device, valid until the next step.
  Tensor step(const std::vector<int32_t>& last_ids);
  // Row r continues old row origins[r]: the next step's rows, `beams` per sentence, each
  // sentence's from one old sentence's rows (those of a sentence left out are dropped).
  void keep_rows(const std::vector<int64_t>& origins);

 private:
  struct LayerCache;
  Tensor embed_step(const std::vector<int32_t>& last_ids);
  Tensor layer_step(Transformer::DecoderLayer& layer, LayerCache& cache, const Tensor& y);
  Tensor heads_of_cache(const Tensor& cache, Tensor& buffer);
  void reserve_positions(int64_t positions);
  void gather_rows(Tensor& buffer, Tensor& scratch, int64_t rows, int64_t width, const Tensor& indices,
                   int64_t new_rows);

  Context& ctx_;
  Transformer& model_;
  int64_t beams_, capacity_, rows_, sentences_, source_length_, position_ = 0, reserved_ = 0;
  std::vector<int32_t> source_lengths_host_;
  Tensor source_lengths_, self_lengths_, positions_;
  std::vector<std::unique_ptr<LayerCache>> layers_;
  // The targets of keep_rows' gathers, swapped with the buffer gathered from.
  Tensor self_scratch_, cross_scratch_;
  Tensor rows_buffer_, keys_heads_, values_heads_, logits_buffer_;
};

}  // namespace scaletrain::models
