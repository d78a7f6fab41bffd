// Dropout layer and its stream (nn/dropout.hpp).
#include "scaletrain/nn/dropout.hpp"

#include <utility>

#include "scaletrain/core/error.hpp"
#include "scaletrain/nn/layers.hpp"

namespace scaletrain::nn {

uint64_t random_position(int64_t global_step, int micro_batch, int rank) {
  ST_CHECK(global_step >= 0 && global_step < (int64_t{1} << kPositionStepBits),
           "dropout stream: global step " << global_step << " is outside [0, 2^" << kPositionStepBits << ")");
  ST_CHECK(
      micro_batch >= 0 && micro_batch < (1 << kPositionMicroBatchBits),
      "dropout stream: micro-batch " << micro_batch << " is outside [0, " << (1 << kPositionMicroBatchBits) << ")");
  ST_CHECK(rank >= 0 && rank < (1 << kPositionRankBits),
           "dropout stream: rank " << rank << " is outside [0, " << (1 << kPositionRankBits) << ")");
  return (static_cast<uint64_t>(global_step) << (kPositionMicroBatchBits + kPositionRankBits)) |
         (static_cast<uint64_t>(micro_batch) << kPositionRankBits) | static_cast<uint64_t>(rank);
}

std::array<uint32_t, 2> dropout_key(uint64_t seed, int layer) {
  ST_CHECK(layer >= 0, "dropout stream: layer index " << layer << " is negative");
  // splitmix64 (Steele, Lea, Flood 2014), as core/rng.cpp seeds xoshiro.
  uint64_t z = (seed ^ kDropoutKeyDomain) + (static_cast<uint64_t>(layer) + 1) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return {static_cast<uint32_t>(z), static_cast<uint32_t>(z >> 32)};
}

Dropout::Dropout(std::shared_ptr<RandomStream> stream, double p) : stream_(std::move(stream)), p_(p) {
  ST_CHECK(stream_ != nullptr, "Dropout: no random stream");
  ST_CHECK(p >= 0.0 && p < 1.0, "Dropout: p must be in [0, 1), got " << p);
  index_ = stream_->add_layer();
}

void Dropout::list_ops(ops::OpNames& ops, bool training) const {
  if (!training) return;
  ops.insert("dropout_forward");
  ops.insert("dropout_backward");
}

Tensor Dropout::forward(Context& ctx, const Tensor& x, bool training) {
  have_forward_ = true;
  forward_training_ = training;
  if (!training) return x;
  // The key follows the stream's seed as it is now (Model::initialize sets it after the layers
  // are built).
  const std::array<uint32_t, 2> key = dropout_key(stream_->seed(), index_);
  forward_params_.p = p_;
  forward_params_.key[0] = key[0];
  forward_params_.key[1] = key[1];
  forward_params_.position = stream_->position();
  Tensor y = reuse_activation(y_buffer_, x.shape(), ctx);
  ops::dropout_forward(ctx, forward_params_, x, y);
  return y;
}

Tensor Dropout::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  ST_CHECK(have_forward_, "Dropout: backward before forward");
  if (!need_dx) return Tensor();
  if (!forward_training_) return dy;
  Tensor dx = fresh_activation(dy.shape(), ctx);
  ops::dropout_backward(ctx, forward_params_, dy, dx);
  return dx;
}

}  // namespace scaletrain::nn
