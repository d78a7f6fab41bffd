// Auxiliary classifier heads (GoogLeNet's two, Inception-v3's one): a classifier that branches off
// the trunk in training, whose loss is added to the main loss with a weight (--aux-loss-weight),
// so that gradients reach the lower layers of a deep network sooner. An AuxTap sits in the trunk
// where the head branches off: it passes its input on unchanged and, in training with a weight
// above 0, runs the head on it and keeps its logits for the task's loss. Evaluation and weight 0
// never run the heads; at weight 0 their parameters are frozen (still in the checkpoint).
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "scaletrain/nn/module.hpp"

namespace scaletrain::nn {

// What the model's taps share with the model: the weight, and per head its logits (after a
// training forward with weight > 0), the gradient of the weighted loss for them (given before
// backward) and its parameters (a range of registration indices, for freezing).
struct AuxHeads {
  double weight = 0.0;
  std::vector<Tensor> logits;
  std::vector<Tensor> dlogits;
  std::vector<std::pair<int, int>> parameters;  // [first, end) per head
  bool active(bool training) const { return training && weight > 0.0; }
};

class AuxTap : public Module {
 public:
  // Claims the next head slot of `heads`. The head itself is given later (set_head), so that its
  // parameters are registered where torchvision registers them, which may be after the trunk's
  // later blocks (GoogLeNet's aux1 and aux2 come after inception5b).
  AuxTap(std::shared_ptr<AuxHeads> heads, ParameterSet& params);
  // head: the classifier; its parameters are those registered from index first_parameter up to
  // now (ParameterSet::num_parameters() before it was built).
  void set_head(ModulePtr head, int first_parameter);

  Tensor forward(Context& ctx, const Tensor& x, bool training) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx = true) override;
  void initialize(Rng& rng) override;
  void list_ops(ops::OpNames& ops, bool training) const override;

 private:
  std::shared_ptr<AuxHeads> heads_;
  ParameterSet& params_;
  int slot_;
  ModulePtr head_;
  bool ran_ = false;  // the last forward ran the head
};

}  // namespace scaletrain::nn
