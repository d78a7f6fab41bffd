// Dropout as a layer, and the run's dropout stream that every Dropout layer of a network reads.
//
// Masks come from ops::dropout_forward's counter-based stream (ops/dropout.hpp): each Dropout
// layer has its own Philox key, derived from the run seed and the layer's index, and every
// micro-batch its own position, derived from (global step, micro-batch, rank). Nothing of the
// stream is saved or advanced: a run resumed at step s draws at step s the masks an uninterrupted
// run draws there (docs/checkpoint-format.md's bitwise promise), on the CPU and the GPU alike.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "scaletrain/nn/module.hpp"
#include "scaletrain/ops/dropout.hpp"

namespace scaletrain::nn {

// The position layout (docs/ops.md): global_step * 2^32 + micro_batch * 2^16 + rank. Every
// micro-batch that --accumulate-steps allows (up to 65,536) on 65,536 ranks for 2^32 steps has a
// position of its own.
constexpr int kPositionRankBits = 16;
constexpr int kPositionMicroBatchBits = 16;
constexpr int kPositionStepBits = 64 - kPositionRankBits - kPositionMicroBatchBits;  // 32
// The position of a micro-batch; throws naming the value outside its field.
uint64_t random_position(int64_t global_step, int micro_batch, int rank);

// The Philox key of dropout layer `layer` (0, 1, ... in construction order) of a run seeded
// `seed`: z = splitmix64's output number layer + 1 from the state seed ^ kDropoutKeyDomain
// (that is, mix(seed ^ kDropoutKeyDomain + (layer + 1) * 0x9e3779b97f4a7c15)), key = (z low 32
// bits, z high 32 bits). The domain constant keeps the keys apart from other streams of the seed.
constexpr uint64_t kDropoutKeyDomain = 0x64726f706f75742eull;  // "dropout."
std::array<uint32_t, 2> dropout_key(uint64_t seed, int layer);

// The stream a network's Dropout layers share: the run seed (their keys) and the position of the
// micro-batch in progress. The network owns it (models::Model::random_stream) and sets the
// position before each training forward (models::Network::set_random_position).
class RandomStream {
 public:
  explicit RandomStream(uint64_t seed = 0) : seed_(seed) {}
  uint64_t seed() const { return seed_; }
  void set_seed(uint64_t seed) { seed_ = seed; }
  uint64_t position() const { return position_; }
  void set_position(int64_t global_step, int micro_batch, int rank) {
    position_ = random_position(global_step, micro_batch, rank);
  }
  // A new layer's index: 0, 1, 2, ... in construction order.
  int add_layer() { return layers_++; }
  int num_layers() const { return layers_; }

 private:
  uint64_t seed_;
  uint64_t position_ = 0;
  int layers_ = 0;
};

// PyTorch Dropout(p): in training each element is zeroed with probability p and the others are
// scaled by 1 / (1 - p); in evaluation the identity (the input itself is returned, no op runs).
class Dropout : public Module {
 public:
  // Takes the next layer index of `stream`. p in [0, 1).
  Dropout(std::shared_ptr<RandomStream> stream, double p = 0.5);
  // x: any shape. In training the mask is the stream's at its current position.
  Tensor forward(Context& ctx, const Tensor& x, bool training) override;
  // With the forward's mask (its key and position, kept); after an evaluation forward, dy itself.
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx = true) override;
  void initialize(Rng&) override {}
  // The dropout ops in training only: evaluation runs none.
  void list_ops(ops::OpNames& ops, bool training) const override;
  double p() const { return p_; }
  int layer_index() const { return index_; }

 private:
  std::shared_ptr<RandomStream> stream_;
  double p_;
  int index_;
  ops::DropoutParams forward_params_;  // the last forward's (p, key, position)
  bool have_forward_ = false, forward_training_ = false;
  Tensor y_buffer_;
};

}  // namespace scaletrain::nn
