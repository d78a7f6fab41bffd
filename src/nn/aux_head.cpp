#include "scaletrain/nn/aux_head.hpp"

#include "scaletrain/core/error.hpp"
#include "scaletrain/ops/activation.hpp"

namespace scaletrain::nn {

AuxTap::AuxTap(std::shared_ptr<AuxHeads> heads, ParameterSet& params)
    : heads_(std::move(heads)), params_(params), slot_(static_cast<int>(heads_->logits.size())) {
  heads_->logits.emplace_back();
  heads_->dlogits.emplace_back();
  heads_->parameters.emplace_back(0, 0);
}

void AuxTap::set_head(ModulePtr head, int first_parameter) {
  ST_CHECK(!head_, "auxiliary head " << slot_ << " set twice");
  head_ = std::move(head);
  heads_->parameters[slot_] = {first_parameter, params_.num_parameters()};
}

Tensor AuxTap::forward(Context& ctx, const Tensor& x, bool training) {
  ST_CHECK(head_, "auxiliary head " << slot_ << " was never built");
  ran_ = heads_->active(training);
  heads_->logits[slot_] = ran_ ? head_->forward(ctx, x, true) : Tensor();
  return x;
}

// The trunk's gradient plus the head's (the head's input gradient buffer takes the sum). A head
// that did not run marks its (zero, frozen) gradients ready, so that their buckets complete.
Tensor AuxTap::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  if (!ran_) {
    const auto [first, end] = heads_->parameters[slot_];
    for (int i = first; i < end; ++i) params_.mark_grad_ready(i);
    return dy;
  }
  const Tensor& dlogits = heads_->dlogits[slot_];
  ST_CHECK(dlogits.defined() && dlogits.shape() == heads_->logits[slot_].shape(),
           "auxiliary head " << slot_ << ": backward without the gradient of its logits");
  Tensor dx = head_->backward(ctx, dlogits, true);
  ops::add_inplace(ctx, dx, dy);
  return dx;
}

void AuxTap::initialize(Rng& rng) {
  ST_CHECK(head_, "auxiliary head " << slot_ << " was never built");
  head_->initialize(rng);
}

void AuxTap::list_ops(ops::OpNames& ops, bool training) const {
  if (heads_->active(training)) {
    head_->list_ops(ops, true);
    ops.insert("add_inplace");
  }
}

}  // namespace scaletrain::nn
