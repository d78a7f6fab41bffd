// Mixed precision's 16-bit weight copies (mixed_precision.hpp).
#include "scaletrain/train/mixed_precision.hpp"

#include <cstring>
#include <optional>

#include "scaletrain/core/error.hpp"

namespace scaletrain::train {

HalfWeights::HalfWeights(Context& ctx, nn::ParameterSet& params, Tensor& master) : params_(params), master_(master) {
  const std::optional<HalfFormat> format = storage_format(ctx.precision());
  if (!format) return;
  Tensor& flat = params_.flat_values();
  ST_CHECK(flat.device() == Device::cpu,
           "internal: " << precision_name(ctx.precision())
                        << " with weights on a GPU: the CUDA backend has no 16-bit kernels yet");
  if (!master_.defined() || master_.numel() != flat.numel()) master_ = Tensor::empty(flat.shape());
  std::memcpy(master_.raw(), flat.raw(), flat.bytes());
  active_ = true;
  for (int i = 0; i < params_.num_parameters(); ++i) {
    Tensor& w = params_.value(i);
    if (has_half_copy(w.shape())) round_in_place(*format, w.data<float>(), w.numel());
  }
}

HalfWeights::~HalfWeights() {
  if (active_) std::memcpy(params_.flat_values().raw(), master_.raw(), master_.bytes());
}

}  // namespace scaletrain::train
