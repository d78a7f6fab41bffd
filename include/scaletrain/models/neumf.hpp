// NeuMF (He et al. 2017, "Neural Collaborative Filtering"), exactly as the MLPerf v0.5 NCF
// reference's PyTorch module (mlcommons/training, retired_benchmarks/ncf/neumf.py; formerly
// recommendation/pytorch/neumf.py):
//   GMF:   mf_user_embed(user) * mf_item_embed(item)                            (N, mf_dim)
//   MLP:   cat(mlp_user_embed(user), mlp_item_embed(item)) -> [Linear, ReLU] per layer
//          (layers[0] -> layers[1] -> ... -> layers.back(); ReLU after every one)   (N, layers.back())
//   final: Linear(cat(GMF, MLP)) -> one logit per (user, item) pair                (N)
// The constructor's defaults are the reference's benchmark run (run_and_time.sh: -f 64
// --layers 256 256 128 64; ncf.py's own argparse defaults, 8 and 64 32 16 8, are not used);
// each MLP embedding is layers[0] / 2 wide. Parameter names and their order are the reference
// module's state_dict: mf_user_embed.weight, mf_item_embed.weight,
// mlp_user_embed.weight, mlp_item_embed.weight, mlp.<k>.weight, mlp.<k>.bias, final.weight,
// final.bias.
//
// NeuMF takes two index tensors rather than one activation, so it is not an nn::Module (whose
// forward takes one tensor) nor a models::Model (an image classifier) but a Network of the
// recommendation task; it owns its ParameterSet and keeps Model's contract: forward keeps what backward needs, backward
// overwrites every parameter gradient and announces each with mark_grad_ready in reverse registration order, so the
// bucketed all-reduce works unchanged.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "scaletrain/backend/context.hpp"
#include "scaletrain/models/network.hpp"
#include "scaletrain/nn/layers.hpp"
#include "scaletrain/nn/parameters.hpp"

namespace scaletrain::models {

// The reference's benchmark sizes (run_and_time.sh: -f 64 --layers 256 256 128 64).
constexpr int kNeuMFDefaultMfDim = 64;
inline const std::vector<int>& neumf_default_layers() {
  static const std::vector<int> layers = {256, 256, 128, 64};
  return layers;
}

class NeuMF : public Network {
 public:
  // num_users, num_items: embedding rows (ids in [0, num_users), [0, num_items)). layers: the
  // MLP's sizes, at least two, layers[0] even (the reference raises otherwise). Parameters are
  // zero until initialize() or a load fills them.
  NeuMF(int64_t num_users, int64_t num_items, int mf_dim = kNeuMFDefaultMfDim,
        std::vector<int> layers = neumf_default_layers());
  NeuMF(const NeuMF&) = delete;
  NeuMF& operator=(const NeuMF&) = delete;

  const std::string& name() const override { return name_; }  // "ncf", as --model
  nn::ParameterSet& params() override { return params_; }
  int64_t num_users() const { return num_users_; }
  int64_t num_items() const { return num_items_; }
  int mf_dim() const { return mf_dim_; }
  const std::vector<int>& layers() const { return layers_; }

  // (num_users + num_items) * (mf_dim + layers[0] / 2) + sum_k (layers[k-1] + 1) * layers[k]
  // + (layers.back() + mf_dim) + 1; 31,832,577 for MovieLens-20M (138,493 users, 26,744 items).
  static int64_t parameter_count(int64_t num_users, int64_t num_items, int mf_dim, const std::vector<int>& layers);

  // users, items: (N) i32, ids in range (an id out of range throws, naming it). Both must stay
  // unchanged until backward() returns. Returns logits (N) f32, owned by the model and
  // overwritten by the next forward. The reference's forward(sigmoid=False).
  Tensor forward(Context& ctx, const Tensor& users, const Tensor& items);
  // dlogits: (N) or (N, 1), d(loss)/d(logits) of the last forward. Overwrites every parameter
  // gradient (embedding tables densely: zero for rows not in the batch) and marks each ready.
  void backward(Context& ctx, const Tensor& dlogits);

  // The reference's initialisation, seeded: embeddings normal(0, 0.01); MLP weights Glorot
  // uniform, limit sqrt(6 / (fan_in + fan_out)); final weight LeCun uniform, limit
  // sqrt(3 / fan_in); biases keep nn.Linear's default, uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)).
  void initialize(uint64_t seed) override;
  ops::OpNames ops(bool training) const override;

 private:
  std::string name_ = "ncf";
  int64_t num_users_, num_items_;
  int mf_dim_;
  std::vector<int> layers_;
  nn::ParameterSet params_;
  int mf_user_, mf_item_, mlp_user_, mlp_item_;
  std::vector<std::unique_ptr<nn::Linear>> mlp_;
  std::vector<std::unique_ptr<nn::ReLU>> relu_;
  std::unique_ptr<nn::Linear> final_;
  Tensor users_, items_;  // forward inputs, for the embedding gradients
  Tensor mf_u_, mf_i_;    // the GMF factors of the last forward, for the product's gradient
  Tensor mf_user_out_, mf_item_out_, gmf_, mlp_user_out_, mlp_item_out_, mlp_in_, joined_;
  Tensor d_gmf_, d_mlp_out_, d_mf_user_, d_mf_item_, d_mlp_user_, d_mlp_item_;
  int64_t last_batch_ = -1;
};

}  // namespace scaletrain::models
