// NeuMF on the NCF ops (embedding, multiply, concat_features) and the Linear and ReLU layers.
// Buffers are reused between steps (nn::reuse_buffer) as in the layers; the embedding tables'
// gradients are dense (the reference uses nn.Embedding without sparse=True).
#include "scaletrain/models/neumf.hpp"

#include <cmath>
#include <string>

#include "scaletrain/core/error.hpp"
#include "scaletrain/core/rng.hpp"
#include "scaletrain/ops/concat.hpp"
#include "scaletrain/ops/embedding.hpp"
#include "scaletrain/ops/multiply.hpp"

namespace scaletrain::models {

namespace {

void fill_uniform(Tensor& t, Rng& rng, double limit) {
  float* p = t.data<float>();
  for (int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = static_cast<float>(rng.uniform(-limit, limit));
}

void check_ids(const Tensor& ids, const char* what) {
  ST_CHECK(ids.defined() && ids.dtype() == DType::i32 && ids.ndim() == 1,
           "NeuMF: " << what << " must be (N) int32, got " << (ids.defined() ? shape_string(ids.shape()) : "none"));
}

}  // namespace

NeuMF::NeuMF(int64_t num_users, int64_t num_items, int mf_dim, std::vector<int> layers)
    : num_users_(num_users), num_items_(num_items), mf_dim_(mf_dim), layers_(std::move(layers)) {
  ST_CHECK(num_users >= 1 && num_items >= 1,
           "NeuMF: needs at least one user and one item, got " << num_users << " and " << num_items);
  ST_CHECK(mf_dim >= 1, "NeuMF: mf_dim must be at least 1, got " << mf_dim);
  ST_CHECK(layers_.size() >= 2, "NeuMF: the MLP needs at least two layer sizes, got " << layers_.size());
  for (int size : layers_) ST_CHECK(size >= 1, "NeuMF: MLP layer sizes must be positive, got " << size);
  ST_CHECK(layers_[0] % 2 == 0, "NeuMF: layers[0] must be even (user and item halves), got " << layers_[0]);
  // Registration order is the reference module's attribute order, hence its state_dict order.
  mf_user_ = params_.add_parameter("mf_user_embed.weight", {num_users, mf_dim});
  mf_item_ = params_.add_parameter("mf_item_embed.weight", {num_items, mf_dim});
  mlp_user_ = params_.add_parameter("mlp_user_embed.weight", {num_users, layers_[0] / 2});
  mlp_item_ = params_.add_parameter("mlp_item_embed.weight", {num_items, layers_[0] / 2});
  // Read only by row lookups: --optimizer lazy_adam updates just the rows a step looked up.
  for (int table : {mf_user_, mf_item_, mlp_user_, mlp_item_}) params_.set_lookup_only(table);
  for (std::size_t k = 1; k < layers_.size(); ++k) {
    mlp_.push_back(std::make_unique<nn::Linear>(params_, "mlp." + std::to_string(k - 1), layers_[k - 1], layers_[k]));
    // In place: the Linear before it keeps its input, not its output, for backward.
    relu_.push_back(std::make_unique<nn::ReLU>(true));
  }
  final_ = std::make_unique<nn::Linear>(params_, "final", layers_.back() + mf_dim, 1);
  params_.finalize();
}

int64_t NeuMF::parameter_count(int64_t num_users, int64_t num_items, int mf_dim, const std::vector<int>& layers) {
  int64_t count = (num_users + num_items) * (mf_dim + layers.at(0) / 2);
  for (std::size_t k = 1; k < layers.size(); ++k) count += (static_cast<int64_t>(layers[k - 1]) + 1) * layers[k];
  return count + layers.back() + mf_dim + 1;
}

Tensor NeuMF::forward(Context& ctx, const Tensor& users, const Tensor& items) {
  check_ids(users, "users");
  check_ids(items, "items");
  ST_CHECK(users.dim(0) == items.dim(0), "NeuMF: " << users.dim(0) << " users but " << items.dim(0) << " items");
  const int64_t n = users.dim(0);
  const int64_t half = layers_[0] / 2;
  // GMF branch.
  Tensor mf_u = nn::reuse_activation(mf_user_out_, {n, mf_dim_}, ctx);
  Tensor mf_i = nn::reuse_activation(mf_item_out_, {n, mf_dim_}, ctx);
  ops::embedding_forward(ctx, params_.value(mf_user_), users, mf_u);
  ops::embedding_forward(ctx, params_.value(mf_item_), items, mf_i);
  Tensor gmf = nn::reuse_activation(gmf_, {n, mf_dim_}, ctx);
  ops::multiply_forward(ctx, mf_u, mf_i, gmf);
  // MLP branch.
  Tensor mlp_u = nn::reuse_activation(mlp_user_out_, {n, half}, ctx);
  Tensor mlp_i = nn::reuse_activation(mlp_item_out_, {n, half}, ctx);
  ops::embedding_forward(ctx, params_.value(mlp_user_), users, mlp_u);
  ops::embedding_forward(ctx, params_.value(mlp_item_), items, mlp_i);
  Tensor h = nn::reuse_activation(mlp_in_, {n, 2 * half}, ctx);
  ops::concat_features_forward(ctx, mlp_u, mlp_i, h);
  for (std::size_t k = 0; k < mlp_.size(); ++k) h = relu_[k]->forward(ctx, mlp_[k]->forward(ctx, h, true), true);
  // Joined: cat(GMF, MLP), as the reference orders it.
  Tensor joined = nn::reuse_activation(joined_, {n, mf_dim_ + layers_.back()}, ctx);
  ops::concat_features_forward(ctx, gmf, h, joined);
  Tensor logits = final_->forward(ctx, joined, true);
  users_ = users;
  items_ = items;
  mf_u_ = mf_u;
  mf_i_ = mf_i;
  last_batch_ = n;
  return logits.reshape({n});
}

void NeuMF::backward(Context& ctx, const Tensor& dlogits) {
  ST_CHECK(last_batch_ >= 0, "NeuMF: backward before forward");
  const int64_t n = last_batch_;
  ST_CHECK(dlogits.numel() == n && (dlogits.ndim() == 1 || (dlogits.ndim() == 2 && dlogits.dim(1) == 1)),
           "NeuMF: dlogits " << shape_string(dlogits.shape()) << " does not match the logits [" << n << "]");
  const int64_t half = layers_[0] / 2;
  Tensor d_joined = final_->backward(ctx, dlogits.reshape({n, 1}), true);
  Tensor d_gmf = nn::reuse_activation(d_gmf_, {n, mf_dim_}, ctx);
  Tensor d_h = nn::reuse_activation(d_mlp_out_, {n, layers_.back()}, ctx);
  ops::concat_features_backward(ctx, d_joined, d_gmf, d_h);
  // MLP layers, last first; the first one's input gradient goes to the embeddings.
  for (std::size_t k = mlp_.size(); k-- > 0;) d_h = mlp_[k]->backward(ctx, relu_[k]->backward(ctx, d_h, true), true);
  Tensor d_mlp_u = nn::reuse_activation(d_mlp_user_, {n, half}, ctx);
  Tensor d_mlp_i = nn::reuse_activation(d_mlp_item_, {n, half}, ctx);
  ops::concat_features_backward(ctx, d_h, d_mlp_u, d_mlp_i);
  ops::embedding_backward(ctx, items_, d_mlp_i, params_.grad(mlp_item_));
  params_.mark_grad_ready(mlp_item_);
  ops::embedding_backward(ctx, users_, d_mlp_u, params_.grad(mlp_user_));
  params_.mark_grad_ready(mlp_user_);
  // GMF: d(u * i) = (d * i, d * u).
  Tensor d_mf_u = nn::reuse_activation(d_mf_user_, {n, mf_dim_}, ctx);
  Tensor d_mf_i = nn::reuse_activation(d_mf_item_, {n, mf_dim_}, ctx);
  ops::multiply_backward(ctx, mf_u_, mf_i_, d_gmf, d_mf_u, d_mf_i);
  ops::embedding_backward(ctx, items_, d_mf_i, params_.grad(mf_item_));
  params_.mark_grad_ready(mf_item_);
  ops::embedding_backward(ctx, users_, d_mf_u, params_.grad(mf_user_));
  params_.mark_grad_ready(mf_user_);
}

ops::OpNames NeuMF::ops(bool training) const {
  ops::OpNames ops{"embedding_forward", "multiply_forward", "concat_features_forward"};
  if (training) ops.insert({"embedding_backward", "multiply_backward", "concat_features_backward"});
  for (const auto& layer : mlp_) layer->list_ops(ops, training);
  for (const auto& relu : relu_) relu->list_ops(ops, training);
  final_->list_ops(ops, training);
  return ops;
}

void NeuMF::initialize(uint64_t seed) {
  Rng rng(seed);
  for (int index : {mf_user_, mf_item_, mlp_user_, mlp_item_}) {
    Tensor& t = params_.value(index);
    float* p = t.data<float>();
    for (int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = static_cast<float>(0.01 * rng.normal());
  }
  auto init_linear = [&](nn::Linear& layer, int fan_in, double weight_limit) {
    fill_uniform(params_.value(layer.weight_index()), rng, weight_limit);
    fill_uniform(params_.value(layer.bias_index()), rng, 1.0 / std::sqrt(static_cast<double>(fan_in)));
  };
  for (std::size_t k = 0; k < mlp_.size(); ++k) {
    const double fan_in = layers_[k], fan_out = layers_[k + 1];
    init_linear(*mlp_[k], layers_[k], std::sqrt(6.0 / (fan_in + fan_out)));  // glorot_uniform
  }
  const int final_in = layers_.back() + mf_dim_;
  init_linear(*final_, final_in, std::sqrt(3.0 / final_in));  // lecun_uniform
}

}  // namespace scaletrain::models
