// LARS update on the flat buffers: a parallel pass for the per-tensor norms, the trust ratios in
// double, then a parallel pass for the momentum update in float (see lars.hpp for the rule).
#include "scaletrain/optim/lars.hpp"

#include <algorithm>
#include <cmath>

#include "scaletrain/core/error.hpp"

namespace scaletrain::optim {

namespace {

// Elements per chunk: large enough that a chunk's loop dwarfs the scheduling cost, small enough
// that ResNet-50's largest tensors (2.4 M elements) split over many threads.
constexpr int64_t kChunkElements = int64_t{1} << 14;
// Below this many parameters, threads cost more than they save (the same bound as Sgd).
constexpr int64_t kParallelElements = int64_t{1} << 15;

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
    const nn::TensorInfo& info = params_.parameter_info(t);
    const int64_t end = info.offset + shape_numel(info.shape);
    for (int64_t b = info.offset; b < end; b += kChunkElements)
      chunks_.push_back({t, b, std::min(end, b + kChunkElements)});
  }
  chunk_w_sq_.assign(chunks_.size(), 0.0);
  chunk_g_sq_.assign(chunks_.size(), 0.0);
}

void Lars::compute_trust_ratios() {
  const float* w = params_.flat_values().data<float>();
  const float* g = params_.flat_grads().data<float>();
  const int64_t num_chunks = static_cast<int64_t>(chunks_.size());
  const bool parallel = params_.parameter_count() > kParallelElements;
  // Squares in double: a 2.4 M-element float sum would lose digits the ratio needs.
#pragma omp parallel for schedule(dynamic, 8) if (parallel)
  for (int64_t c = 0; c < num_chunks; ++c) {
    const Chunk& chunk = chunks_[c];
    double w_sq = 0.0, g_sq = 0.0;
    if (adapted_[chunk.tensor]) {
#pragma omp simd reduction(+ : w_sq, g_sq)
      for (int64_t i = chunk.begin; i < chunk.end; ++i) {
        w_sq += static_cast<double>(w[i]) * w[i];
        g_sq += static_cast<double>(g[i]) * g[i];
      }
    }
    chunk_w_sq_[c] = w_sq;
    chunk_g_sq_[c] = g_sq;
  }
  // Chunks in order, so every tensor's sum is the same for any thread count.
  std::vector<double> w_sq(params_.num_parameters(), 0.0), g_sq(params_.num_parameters(), 0.0);
  for (int64_t c = 0; c < num_chunks; ++c) {
    w_sq[chunks_[c].tensor] += chunk_w_sq_[c];
    g_sq[chunks_[c].tensor] += chunk_g_sq_[c];
  }
  for (int t = 0; t < params_.num_parameters(); ++t)
    trust_[t] = adapted_[t] ? guarded_trust_ratio(std::sqrt(w_sq[t]), std::sqrt(g_sq[t]), options_) : 1.0;
}

void Lars::apply_update(double lr) {
  float* w = params_.flat_values().data<float>();
  const float* g = params_.flat_grads().data<float>();
  float* v = momentum_.data<float>();
  const float mu = static_cast<float>(options_.momentum);
  const int64_t num_chunks = static_cast<int64_t>(chunks_.size());
  const bool parallel = params_.parameter_count() > kParallelElements;
#pragma omp parallel for schedule(dynamic, 8) if (parallel)
  for (int64_t c = 0; c < num_chunks; ++c) {
    const Chunk& chunk = chunks_[c];
    const bool adapted = adapted_[chunk.tensor] != 0;
    // The reference's apply_momentum(var, mom, 1, (g + wd * w) * lr * trust, mu).
    const float scaled_lr = static_cast<float>(lr * trust_[chunk.tensor]);
    const float wd = adapted ? static_cast<float>(options_.weight_decay) : 0.0f;
#pragma omp simd
    for (int64_t i = chunk.begin; i < chunk.end; ++i) {
      const float vi = mu * v[i] + scaled_lr * (g[i] + wd * w[i]);
      v[i] = vi;
      w[i] = w[i] - vi;
    }
  }
}

void Lars::step(Context& ctx, double lr) {
  ST_CHECK(std::isfinite(lr), "learning rate " << lr << " is not finite");
  // Its kernels are host loops over the flat buffers: no GPU version yet (the CUDA backend's
  // first models train with SGD).
  ST_CHECK(ctx.device() == Device::cpu,
           "--optimizer lars runs on the CPU only; its parameters are on " << device_name(ctx.device()));
  compute_trust_ratios();
  apply_update(lr);
  count_step();
}

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
