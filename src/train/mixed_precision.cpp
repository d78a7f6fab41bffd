// Mixed precision's 16-bit weight copies (mixed_precision.hpp).
#include "scaletrain/train/mixed_precision.hpp"

#include <exception>
#include <optional>

#include "scaletrain/core/error.hpp"
#include "scaletrain/core/log.hpp"
#include "scaletrain/ops/cast.hpp"

namespace scaletrain::train {

HalfWeights::HalfWeights(Context& ctx, nn::ParameterSet& params, Tensor& master) : params_(params), master_(master) {
  const std::optional<HalfFormat> format = storage_format(ctx.precision());
  if (!format) return;
  const Tensor& flat = params_.flat_values();
  if (!master_.defined() || master_.numel() != flat.numel() || master_.device() != flat.device())
    master_ = Tensor::empty(flat.shape(), DType::f32, flat.device());
  master_.copy_from(flat);  // on the weights' device, in its stream order
  active_ = true;
  for (int i = 0; i < params_.num_parameters(); ++i) {
    Tensor& w = params_.value(i);
    if (has_half_copy(w.shape())) ops::round_to_half(ctx, w, *format);
  }
}

// A destructor must not throw: a failed copy back (a GPU fault) is said, and the device's next call
// reports the fault as an error where it can stop the run.
HalfWeights::~HalfWeights() {
  if (!active_) return;
  try {
    params_.flat_values().copy_from(master_);
  } catch (const std::exception& e) {
    ST_WARN("the fp32 master weights could not be put back after the step: " << e.what());
  }
}

}  // namespace scaletrain::train
