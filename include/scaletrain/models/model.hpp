// Model: a named network (a Module tree) with its ParameterSet, and the registry that builds
// models by name (--model). Parameter and buffer names follow torchvision's state_dict, so a
// checkpoint maps one-to-one onto a PyTorch model.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "scaletrain/core/json.hpp"
#include "scaletrain/models/network.hpp"
#include "scaletrain/models/registry.hpp"
#include "scaletrain/nn/aux_head.hpp"
#include "scaletrain/nn/dropout.hpp"
#include "scaletrain/nn/module.hpp"
#include "scaletrain/nn/parameters.hpp"

namespace scaletrain::models {

// An image classifier: images (N, H, W, C) in, logits (N, num_classes) out.
class Model : public Network {
 public:
  // Builders construct the Model first (its ParameterSet receives the layers' registrations),
  // then hand over the network with set_network().
  Model(std::string name, int num_classes, int in_channels);
  ~Model() override;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const std::string& name() const override { return name_; }
  int num_classes() const { return num_classes_; }
  int in_channels() const { return in_channels_; }
  nn::ParameterSet& params() override { return params_; }
  nn::Module& network() { return *network_; }

  // Takes the network and finalizes the ParameterSet (parameters are zero until initialize()
  // or a checkpoint load fills them).
  void set_network(nn::ModulePtr network);

  // x: (N, H, W, C) float32, normalised; it must stay unchanged until backward() returns.
  // Returns logits (N, num_classes), owned by the model and overwritten by the next forward.
  Tensor forward(Context& ctx, const Tensor& x, bool training);
  // dlogits: (N, num_classes), after a training-mode forward; aux_dlogits: the gradients of the
  // weighted auxiliary losses for aux_logits(), one per head, where the heads ran. Overwrites every
  // parameter gradient, calling params().mark_grad_ready(i) once per parameter as each is
  // complete, roughly in reverse registration order.
  void backward(Context& ctx, const Tensor& dlogits, const std::vector<Tensor>& aux_dlogits = {});

  // Auxiliary heads (nn/aux_head.hpp): their number, the weight of their losses (the registry's
  // "aux-loss-weight" default until set; 0 freezes their parameters), and their logits after a
  // training forward, empty where the heads did not run (evaluation, weight 0).
  int num_aux_heads() const { return static_cast<int>(aux_heads_->logits.size()); }
  double aux_loss_weight() const { return aux_heads_->weight; }
  void set_aux_loss_weight(double weight);
  std::vector<Tensor> aux_logits() const;
  // For builders: what the model's AuxTaps share.
  const std::shared_ptr<nn::AuxHeads>& aux_heads() { return aux_heads_; }
  // torchvision's initialisation, seeded: conv kaiming_normal_(mode='fan_out', nonlinearity='relu');
  // batch norm weight 1, bias 0, running_mean 0, running_var 1; Linear: PyTorch's default
  // (weight and bias uniform(-1/sqrt(in), 1/sqrt(in))).
  // Also keys the dropout stream with `seed` (the run's --seed, the same after a resume).
  void initialize(uint64_t seed) override;
  ops::OpNames ops(bool training) const override;
  // Moves the dropout stream to the micro-batch's position (nn::random_position).
  void set_random_position(int64_t global_step, int micro_batch, int rank) override;
  // The stream the model's Dropout layers share: builders pass it to each nn::Dropout they
  // construct, which takes the next layer index (its key) in construction order.
  const std::shared_ptr<nn::RandomStream>& random_stream() const { return random_stream_; }

 private:
  std::string name_;
  int num_classes_, in_channels_;
  nn::ParameterSet params_;
  nn::ModulePtr network_;
  std::shared_ptr<nn::AuxHeads> aux_heads_;
  std::shared_ptr<nn::RandomStream> random_stream_ = std::make_shared<nn::RandomStream>();
  int64_t last_batch_ = -1;
  bool last_training_ = false;
};

// The parameters of the model's auxiliary heads (0 without heads).
int64_t aux_head_parameters(Model& model);
// Multiply-adds of the convolutions and fully connected layers in one evaluation forward of one
// image of input_chw (C, H, W): the main head only, as in evaluation. Throws naming the size when
// the model cannot take it.
int64_t forward_macs_per_sample(Model& model, const Shape& input_chw);

// The image classifiers of the registry (registry.hpp). Throws scaletrain::Error for an unknown
// name (listing the known ones) and for a model of another task.
// in_channels: from the dataset (1 for Fashion-MNIST, 3 for RGB).
std::unique_ptr<Model> make_model(const std::string& name, int num_classes, int in_channels);

// The ops a model of the registry runs (Network::ops), of any task: from a small uninitialised
// instance. Throws for an unknown name.
ops::OpNames model_ops(const std::string& name, bool training);

// The state_dict entries (parameters and batch-norm buffers) in torchvision's state_dict order:
// module by module, each module's parameters then its buffers.
std::vector<nn::TensorInfo> state_dict_infos(const nn::ParameterSet& params);

// {"model": name, "parameters": count, "num_classes": K, "input_shape": [C, H, W],
//  "tensors": [{"name": ..., "shape": [...], "kind": "parameter" | "buffer"}, ...]}, tensors in
// state_dict order (num_batches_tracked is not stored). input_chw must have the model's channels.
Json describe_model(Model& model, const Shape& input_chw);
// Its "tensors" list, for any network's parameters: [{"name", "shape", "kind"}, ...].
Json describe_tensors(const nn::ParameterSet& params);

}  // namespace scaletrain::models
