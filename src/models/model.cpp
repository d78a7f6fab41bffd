// Model plumbing shared by every architecture: forward/backward entry points with shape checks,
// seeded initialisation, the registry of model names, and the description `scaletrain info` prints.
#include "scaletrain/models/model.hpp"

#include <cmath>
#include <map>
#include <set>

#include "scaletrain/core/error.hpp"
#include "scaletrain/models/imagenet_cnns.hpp"
#include "scaletrain/models/neumf.hpp"
#include "scaletrain/models/resnet.hpp"
#include "scaletrain/models/transformer.hpp"

namespace scaletrain::models {

Model::Model(std::string name, int num_classes, int in_channels)
    : name_(std::move(name)),
      num_classes_(num_classes),
      in_channels_(in_channels),
      aux_heads_(std::make_shared<nn::AuxHeads>()) {
  ST_CHECK(num_classes >= 1, "model " << name_ << ": --num-classes must be at least 1, got " << num_classes);
  ST_CHECK(in_channels >= 1, "model " << name_ << ": input channels must be at least 1, got " << in_channels);
  aux_heads_->weight = default_aux_loss_weight(name_);
}

Model::~Model() = default;

void Model::set_network(nn::ModulePtr network) {
  ST_CHECK(network_ == nullptr, "model " << name_ << ": network set twice");
  network_ = std::move(network);
  params_.finalize();
  set_aux_loss_weight(aux_heads_->weight);  // freezes the heads of a model whose default is 0
}

void Model::set_aux_loss_weight(double weight) {
  ST_CHECK(std::isfinite(weight) && weight >= 0.0, "--aux-loss-weight must be a finite value >= 0, got " << weight);
  ST_CHECK(weight == 0.0 || num_aux_heads() > 0,
           "--aux-loss-weight " << weight << ": model " << name_ << " has no auxiliary heads (use 0)");
  aux_heads_->weight = weight;
  for (const auto& [first, end] : aux_heads_->parameters)
    for (int i = first; i < end; ++i) params_.set_frozen(i, weight == 0.0);
}

std::vector<Tensor> Model::aux_logits() const {
  if (!aux_heads_->active(last_training_)) return {};
  return aux_heads_->logits;
}

Tensor Model::forward(Context& ctx, const Tensor& x, bool training) {
  ST_CHECK(network_ != nullptr, "model " << name_ << " has no network");
  ST_CHECK(x.ndim() == 4 && x.dim(3) == in_channels_,
           "model " << name_ << " expects images (N, H, W, C=" << in_channels_ << "), got " << shape_string(x.shape()));
  Tensor logits = network_->forward(ctx, x, training);
  ST_CHECK(logits.ndim() == 2 && logits.dim(1) == num_classes_, "model " << name_ << " produced "
                                                                         << shape_string(logits.shape())
                                                                         << ", expected (N, " << num_classes_ << ")");
  last_batch_ = x.dim(0);
  last_training_ = training;
  return logits;
}

void Model::backward(Context& ctx, const Tensor& dlogits, const std::vector<Tensor>& aux_dlogits) {
  ST_CHECK(last_batch_ >= 0, "model " << name_ << ": backward before forward");
  ST_CHECK(dlogits.ndim() == 2 && dlogits.dim(0) == last_batch_ && dlogits.dim(1) == num_classes_,
           "model " << name_ << ": dlogits " << shape_string(dlogits.shape()) << " does not match the logits ["
                    << last_batch_ << ", " << num_classes_ << "]");
  const bool heads_ran = aux_heads_->active(last_training_);
  ST_CHECK(aux_dlogits.size() == (heads_ran ? aux_heads_->logits.size() : 0),
           "model " << name_ << ": backward got " << aux_dlogits.size() << " auxiliary gradients for "
                    << (heads_ran ? aux_heads_->logits.size() : 0) << " heads that ran");
  for (std::size_t i = 0; i < aux_dlogits.size(); ++i) aux_heads_->dlogits[i] = aux_dlogits[i];
  // The input needs no gradient: the first conv skips its data gradient.
  network_->backward(ctx, dlogits, false);
  for (Tensor& d : aux_heads_->dlogits) d = Tensor();  // the task's buffers, not ours to keep
}

ops::OpNames model_ops(const std::string& name, bool training) {
  // An uninitialised instance, as small as the model allows: the ops do not depend on the sizes.
  if (model_entry(name).task == kTaskRecommendation) return NeuMF(1, 1).ops(training);
  if (model_entry(name).task == kTaskTranslation) {
    TransformerConfig c = transformer_config(name);
    c.width = 8, c.heads = 2, c.inner = 8, c.layers = 1;
    return Transformer(c, 3).ops(training);
  }
  return make_model(name, 2, 3)->ops(training);
}

ops::OpNames Model::ops(bool training) const {
  ops::OpNames ops;
  network_->list_ops(ops, training);
  return ops;
}

void Model::initialize(uint64_t seed) {
  ST_CHECK(network_ != nullptr, "model " << name_ << " has no network");
  Rng rng(seed);
  network_->initialize(rng);
  random_stream_->set_seed(seed);
}

void Model::set_random_position(int64_t global_step, int micro_batch, int rank) {
  // A model without dropout draws nothing, so the position's range limits must not refuse its run.
  if (random_stream_->num_layers() > 0) random_stream_->set_position(global_step, micro_batch, rank);
}

std::unique_ptr<Model> make_model(const std::string& name, int num_classes, int in_channels) {
  const ModelEntry& entry = model_entry(name);
  ST_CHECK(entry.task == kTaskImageClassification,
           "model " << name << " is not an image classifier (its task is " << entry.task << ")");
  if (name == "resnet20") return make_resnet20(num_classes, in_channels);
  if (name == "alexnet") return make_alexnet(num_classes, in_channels);
  if (name == "googlenet") return make_googlenet(num_classes, in_channels);
  if (name == "inception_v3") return make_inception_v3(num_classes, in_channels);
  if (name == "alexnet-caffe") return make_alexnet_caffe(num_classes, in_channels);
  if (name == "googlenet-caffe") return make_googlenet_caffe(num_classes, in_channels);
  return make_resnet50(num_classes, in_channels);
}

namespace {
std::string module_of(const std::string& name) {
  const auto dot = name.rfind('.');
  return dot == std::string::npos ? std::string() : name.substr(0, dot);
}
}  // namespace

std::vector<nn::TensorInfo> state_dict_infos(const nn::ParameterSet& params) {
  // torchvision's state_dict lists each module's parameters, then its buffers, module by module
  // in registration order; our ParameterSet keeps parameters and buffers apart, so interleave.
  std::map<std::string, std::vector<int>> buffers_of;
  for (int b = 0; b < params.num_buffers(); ++b) buffers_of[module_of(params.buffer_info(b).name)].push_back(b);
  std::vector<nn::TensorInfo> out;
  std::set<std::string> emitted;
  auto emit_buffers = [&](const std::string& module) {
    if (!emitted.insert(module).second) return;
    auto it = buffers_of.find(module);
    if (it == buffers_of.end()) return;
    for (int b : it->second) out.push_back(params.buffer_info(b));
  };
  for (int i = 0; i < params.num_parameters(); ++i) {
    out.push_back(params.parameter_info(i));
    const std::string module = module_of(params.parameter_info(i).name);
    const bool last_of_module =
        i + 1 == params.num_parameters() || module_of(params.parameter_info(i + 1).name) != module;
    if (last_of_module) emit_buffers(module);
  }
  for (int b = 0; b < params.num_buffers(); ++b) emit_buffers(module_of(params.buffer_info(b).name));
  return out;
}

int64_t aux_head_parameters(Model& model) {
  int64_t count = 0;
  for (const auto& [first, end] : model.aux_heads()->parameters)
    for (int i = first; i < end; ++i) count += shape_numel(model.params().parameter_info(i).shape);
  return count;
}

int64_t forward_macs_per_sample(Model& model, const Shape& input_chw) {
  Context ctx;
  const Tensor x = Tensor::zeros({1, input_chw[1], input_chw[2], input_chw[0]});
  ops::MacCounter macs;
  try {
    model.forward(ctx, x, /*training=*/false);
  } catch (const Error& e) {
    ST_THROW("model " << model.name() << " cannot take " << input_chw[1] << "x" << input_chw[2]
                      << " images: " << e.what());
  }
  return macs.total();
}

Json describe_model(Model& model, const Shape& input_chw) {
  ST_CHECK(input_chw.size() == 3 && input_chw[0] > 0 && input_chw[1] > 0 && input_chw[2] > 0,
           "input shape must be C,H,W with positive sizes, got " << shape_string(input_chw));
  ST_CHECK(input_chw[0] == model.in_channels(), "input shape " << shape_string(input_chw) << " has " << input_chw[0]
                                                               << " channels but model " << model.name()
                                                               << " was built for " << model.in_channels());
  Json j = Json::object();
  j.set("model", model.name());
  j.set("parameters", model.params().parameter_count());
  j.set("parameters_without_aux_heads", model.params().parameter_count() - aux_head_parameters(model));
  j.set("forward_macs_per_sample", forward_macs_per_sample(model, input_chw));
  j.set("num_classes", model.num_classes());
  j.set("input_shape", Json::array_of(input_chw));
  j.set("tensors", describe_tensors(model.params()));
  return j;
}

Json describe_tensors(const nn::ParameterSet& params) {
  std::set<std::string> buffer_names;
  for (int b = 0; b < params.num_buffers(); ++b) buffer_names.insert(params.buffer_info(b).name);
  Json tensors = Json::array();
  for (const auto& info : state_dict_infos(params)) {
    Json t = Json::object();
    t.set("name", info.name);
    t.set("shape", Json::array_of(info.shape));
    t.set("kind", buffer_names.count(info.name) ? "buffer" : "parameter");
    tensors.push_back(std::move(t));
  }
  return tensors;
}

}  // namespace scaletrain::models
