// LARS update on the flat buffers: the op lars_sums_of_squares for the per-tensor norms, the
// trust ratios in double, then the op lars_update for the momentum update (see lars.hpp for the
// rule; ops/lars.hpp for the passes).
#include "scaletrain/optim/lars.hpp"

#include <algorithm>
#include <cmath>

#include "scaletrain/core/error.hpp"
#include "scaletrain/ops/lars.hpp"

namespace scaletrain::optim {

namespace {

// Elements per chunk: large enough that a chunk's loop dwarfs the scheduling cost, small enough
// that ResNet-50's largest tensors (2.4 M elements) split over many threads.
constexpr int64_t kChunkElements = int64_t{1} << 14;

void check_options(const LarsOptions& o) {
  ST_CHECK(o.momentum >= 0.0 && std::isfinite(o.momentum),
           "--momentum must be a finite value >= 0, got " << o.momentum);
  ST_CHECK(o.weight_decay >= 0.0 && std::isfinite(o.weight_decay),
           "--weight-decay must be a finite value >= 0, got " << o.weight_decay);
  ST_CHECK(o.trust_coefficient > 0.0 && std::isfinite(o.trust_coefficient),
           "--lars-trust-coefficient must be a finite value > 0 (MLPerf: 0.001), got " << o.trust_coefficient);
  ST_CHECK(o.epsilon >= 0.0 && std::isfinite(o.epsilon),
           "--lars-epsilon must be a finite value >= 0 (MLPerf: 0), got " << o.epsilon);
}

// The reference's guarded ratio: a tensor whose weights or gradient are all zero keeps the plain
// learning rate rather than a ratio of 0 or a division by zero.
double guarded_trust_ratio(double w_norm, double g_norm, const LarsOptions& o) {
  if (!(w_norm > 0.0) || !(g_norm > 0.0)) return 1.0;
  return o.trust_coefficient * w_norm / (g_norm + o.weight_decay * w_norm + o.epsilon);
}

}  // namespace

const char* lars_exclusion_name(LarsExclusion exclusion) {
  return exclusion == LarsExclusion::bn_and_bias ? "bn_and_bias" : "none";
}

bool lars_excludes(const nn::TensorInfo& info, LarsExclusion exclusion) {
  // torchvision's batch-norm weights/biases and layer biases are exactly its rank-1 parameters;
  // names would miss the batch norm of a downsample branch ("layer2.0.downsample.1.weight").
  return exclusion == LarsExclusion::bn_and_bias && info.shape.size() <= 1;
}

Lars::Lars(nn::ParameterSet& params, const LarsOptions& options) : Optimizer(params), options_(options) {
  check_options(options);
  const int n = params.num_parameters();
  adapted_.resize(n);
  trust_.assign(n, 1.0);
  for (int i = 0; i < n; ++i) adapted_[i] = lars_excludes(params.parameter_info(i), options.exclusion) ? 0 : 1;
  plan_chunks();
}

void Lars::plan_chunks() {
  for (int t = 0; t < params_.num_parameters(); ++t) {
    if (params_.frozen(t)) continue;  // no chunk: neither updated nor counted
    const nn::TensorInfo& info = params_.parameter_info(t);
    const int64_t end = info.offset + shape_numel(info.shape);
    for (int64_t b = info.offset; b < end; b += kChunkElements) {
      chunks_.push_back({b, std::min(end, b + kChunkElements)});
      chunk_tensor_.push_back(t);
      if (adapted_[t]) {
        adapted_chunks_.push_back(chunks_.back());
        adapted_chunk_tensor_.push_back(t);
      }
    }
  }
}

// The op lars_sums_of_squares over the adapted tensors' chunks, the chunk sums added in order
// (so every tensor's sum is the same for any thread count), the trust ratios in double.
void Lars::compute_trust_ratios(Context& ctx) {
  ops::lars_sums_of_squares(ctx, params_.flat_values(), params_.flat_grads(), adapted_chunks_, chunk_w_sq_,
                            chunk_g_sq_);
  std::vector<double> w_sq(params_.num_parameters(), 0.0), g_sq(params_.num_parameters(), 0.0);
  for (std::size_t c = 0; c < adapted_chunks_.size(); ++c) {
    w_sq[adapted_chunk_tensor_[c]] += chunk_w_sq_[c];
    g_sq[adapted_chunk_tensor_[c]] += chunk_g_sq_[c];
  }
  for (int t = 0; t < params_.num_parameters(); ++t)
    trust_[t] = adapted_[t] ? guarded_trust_ratio(std::sqrt(w_sq[t]), std::sqrt(g_sq[t]), options_) : 1.0;
}

// The reference's apply_momentum(var, mom, 1, (g + wd * w) * lr * trust, mu): the op lars_update
// with each chunk's lr * trust and weight decay (none for excluded tensors).
void Lars::apply_update(Context& ctx, double lr) {
  std::vector<float> scaled_lr(chunks_.size()), weight_decay(chunks_.size());
  for (std::size_t c = 0; c < chunks_.size(); ++c) {
    const int t = chunk_tensor_[c];
    scaled_lr[c] = static_cast<float>(lr * trust_[t]);
    weight_decay[c] = adapted_[t] ? static_cast<float>(options_.weight_decay) : 0.0f;
  }
  ops::lars_update(ctx, static_cast<float>(options_.momentum), chunks_, scaled_lr, weight_decay, params_.flat_values(),
                   params_.flat_grads(), momentum_);
}

void Lars::step(Context& ctx, double lr) {
  ST_CHECK(std::isfinite(lr), "learning rate " << lr << " is not finite");
  compute_trust_ratios(ctx);
  apply_update(ctx, lr);
  count_step();
}

ops::OpNames Lars::ops() const { return {"lars_sums_of_squares", "lars_update"}; }

Json Lars::describe() const {
  int adapted_count = 0;
  for (char a : adapted_) adapted_count += a ? 1 : 0;
  Json j = Json::object();
  j.set("name", name());
  j.set("momentum", options_.momentum);
  j.set("weight_decay", options_.weight_decay);
  j.set("trust_coefficient", options_.trust_coefficient);
  j.set("epsilon", options_.epsilon);
  j.set("exclusion", lars_exclusion_name(options_.exclusion));
  j.set("adapted_tensors", adapted_count);
  j.set("excluded_tensors", static_cast<int>(adapted_.size()) - adapted_count);
  return j;
}

}  // namespace scaletrain::optim
