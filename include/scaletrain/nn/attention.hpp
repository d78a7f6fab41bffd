// The Transformer's blocks, as the MLPerf reference builds them (retired_benchmarks/transformer/
// tensorflow/transformer/model/: attention_layer.py, ffn_layer.py, transformer.py's
// PrePostProcessingWrapper) and with the parameter names and shapes of torch.nn.Transformer
// (norm_first=True), so that a checkpoint loads into PyTorch with a few lines of h5py.
//
// Activations are token-major: (N * L, D) rows, sentence n's token l at row n * L + l.
// The reference's projections have no bias; PyTorch's MultiheadAttention has in_proj_bias and
// out_proj.bias. Both are here, as PyTorch names them, zero and frozen (nn/parameters.hpp): the
// function is the reference's, and a model trained in PyTorch with biases still computes here as
// there.
#pragma once

#include <memory>
#include <string>

#include "scaletrain/nn/dropout.hpp"
#include "scaletrain/nn/layers.hpp"
#include "scaletrain/ops/layer_norm.hpp"

namespace scaletrain::nn {

// The reference's layer norm epsilon (transformer.py's LayerNormalization); PyTorch's default is 1e-5.
constexpr float kTransformerLayerNormEps = 1e-6f;

// PyTorch LayerNorm(D, eps): "<name>.weight" (gamma, 1), "<name>.bias" (beta, 0).
class LayerNorm : public Module {
 public:
  LayerNorm(ParameterSet& params, const std::string& name, int features, float eps = kTransformerLayerNormEps);
  // x: (M, D). Keeps x for backward (it must stay unchanged until then).
  Tensor forward(Context& ctx, const Tensor& x, bool training) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx = true) override;
  void initialize(Rng& rng) override;
  void list_ops(ops::OpNames& ops, bool training) const override;

 private:
  ParameterSet* params_;
  ops::LayerNormParams ln_;
  int weight_, bias_;
  Tensor x_, mean_, rstd_;
  Tensor y_buffer_, dx_buffer_, mean_buffer_, rstd_buffer_;
};

// The shape of one attention call: N sentences, Lq queries and Lk keys each.
struct AttentionShape {
  int64_t n = 0, lq = 0, lk = 0;
};

// What one attention call of incremental decoding writes (MultiheadAttention::attend): the
// caller's, kept from call to call, so that decoding leaves the layer's training state alone.
struct AttentionScratch {
  Tensor q, qh, scores, probs, context_h, context, out;
};

// Multi-head attention without bias terms (the reference's), with PyTorch's names:
// "<name>.in_proj_weight" (3D, D) = the query, key and value projections stacked,
// "<name>.in_proj_bias" (3D), "<name>.out_proj.weight" (D, D), "<name>.out_proj.bias" (D).
// Scores are q k^T / sqrt(D / heads) over the valid keys (ops/softmax.hpp's padding and causal
// masks), dropout on the probabilities in training (the reference's attention_dropout).
class MultiheadAttention {
 public:
  MultiheadAttention(ParameterSet& params, const std::string& name, int width, int heads,
                     std::shared_ptr<RandomStream> stream, double dropout);
  // query: (N * Lq, D); memory: (N * Lk, D), the keys' and values' input (the query itself for
  // self-attention); key_lengths: (N) int32 on the device, each in [1, Lk]. Both inputs must
  // stay unchanged until backward. Returns (N * Lq, D).
  Tensor forward(Context& ctx, const Tensor& query, const Tensor& memory, const AttentionShape& shape,
                 const Tensor& key_lengths, bool causal, bool training);
  // dy: (N * Lq, D). Writes the four parameter gradients (marked ready) and returns the query's
  // gradient; the memory's is memory_gradient() (for self-attention, where memory is the query,
  // it is already added into the returned one).
  Tensor backward(Context& ctx, const Tensor& dy);
  const Tensor& memory_gradient() const { return dmemory_; }

  // Incremental decoding (models/transformer.hpp's IncrementalDecoder) projects keys and values
  // once and keeps them, so it calls the pieces of forward on their own:
  // rows = x W^T + b of one projection (0: query, 1: key, 2: value); x (M, D); rows (M, D),
  // overwritten (a view into a cache, say).
  void project(Context& ctx, const Tensor& x, int which, Tensor& rows) const;
  // Attention of query (N * Lq, D), projected here, over keys and values already projected and
  // in heads layout, kh and vh (N * H, Lk, D / H); key_lengths (N) on the device, each in [1, Lk].
  // No dropout, nothing kept for backward. Returns (N * Lq, D), in scratch.out.
  Tensor attend(Context& ctx, const Tensor& query, const Tensor& kh, const Tensor& vh, const AttentionShape& shape,
                const Tensor& key_lengths, AttentionScratch& scratch) const;
  // Glorot-uniform for each of the three projections and the output, as the reference's Dense
  // layers (fan_in = fan_out = D); the biases 0.
  void initialize(Rng& rng);
  void list_ops(ops::OpNames& ops, bool training) const;

 private:
  Tensor projection(int which) const;  // rows [which * D, (which + 1) * D) of in_proj_weight
  ParameterSet* params_;
  int width_, heads_;
  int in_weight_, in_bias_, out_weight_, out_bias_;
  Dropout dropout_;
  AttentionShape shape_;
  bool self_ = false;
  Tensor query_, memory_, key_lengths_;  // the last forward's inputs
  // Kept from forward to backward: the heads' q, k, v, the probabilities, their dropped-out
  // version (the dropout layer's buffer) and the context rows.
  Tensor qh_, kh_, vh_, probs_, dropped_, context_;
  // Buffers, reused from step to step (reuse_buffer). A projection's rows are needed only until
  // they are split into heads, and the scores only until the softmax: they share the buffers of
  // the gradients that backward writes later.
  Tensor qh_buffer_, kh_buffer_, vh_buffer_, probs_buffer_, context_h_buffer_, context_buffer_, out_buffer_;
  Tensor dcontext_buffer_, dcontext_h_buffer_, ddropped_buffer_, dscores_buffer_, dqh_buffer_, dkh_buffer_, dvh_buffer_,
      dq_buffer_, dk_buffer_, dv_buffer_, dquery_buffer_, dmemory_buffer_, dpart_buffer_;
  Tensor dmemory_, dbias_scratch_;
};

// The position-wise feed-forward block: Linear(D, F) "<name>linear1", ReLU, dropout (the
// reference's relu_dropout), Linear(F, D) "<name>linear2" (PyTorch's TransformerEncoderLayer
// names; prefix is the layer's, e.g. "encoder.layers.0.").
class FeedForward : public Module {
 public:
  FeedForward(ParameterSet& params, const std::string& prefix, int width, int inner,
              std::shared_ptr<RandomStream> stream, double dropout);
  Tensor forward(Context& ctx, const Tensor& x, bool training) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx = true) override;
  // Glorot-uniform weights (the reference's Dense), zero biases.
  void initialize(Rng& rng) override;
  void list_ops(ops::OpNames& ops, bool training) const override;

 private:
  Sequential net_;
};

}  // namespace scaletrain::nn
