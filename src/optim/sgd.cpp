// SGD: the options' checks and the momentum buffer; the update is the op ops::sgd_update, in float
// with float coefficients, operation for operation as PyTorch's kernels do it
// (grad.add(w, alpha=wd), buf.mul_(mu).add_(g), w.add_(g, alpha=-lr)), so one step agrees with
// torch.optim.SGD to float rounding. float(-lr) == -float(lr): rounding is symmetric.
#include "scaletrain/optim/sgd.hpp"

#include <cmath>

#include "scaletrain/core/error.hpp"
#include "scaletrain/ops/sgd.hpp"

namespace scaletrain::optim {

Sgd::Sgd(nn::ParameterSet& params, const SgdOptions& options) : Optimizer(params), options_(options) {
  ST_CHECK(options.momentum >= 0.0 && std::isfinite(options.momentum),
           "--momentum must be a finite value >= 0, got " << options.momentum);
  ST_CHECK(options.weight_decay >= 0.0 && std::isfinite(options.weight_decay),
           "--weight-decay must be a finite value >= 0, got " << options.weight_decay);
  ST_CHECK(!options.nesterov || options.momentum > 0.0, "--nesterov needs a momentum > 0");
}

void Sgd::step(Context& ctx, double lr) {
  ST_CHECK(std::isfinite(lr), "learning rate " << lr << " is not finite");
  ops::SgdUpdateParams p;
  p.lr = static_cast<float>(lr);
  p.momentum = static_cast<float>(options_.momentum);
  p.weight_decay = static_cast<float>(options_.weight_decay);
  p.nesterov = options_.nesterov;
  for (const auto& r : params_.trained_ranges()) {
    Tensor values = range_of(params_.flat_values(), r), momentum = range_of(momentum_, r);
    ops::sgd_update(ctx, p, values, range_of(params_.flat_grads(), r), momentum);
  }
  count_step();
}

Json Sgd::describe() const {
  Json j = Json::object();
  j.set("name", name());
  j.set("momentum", options_.momentum);
  j.set("weight_decay", options_.weight_decay);
  j.set("nesterov", options_.nesterov);
  return j;
}

}  // namespace scaletrain::optim
