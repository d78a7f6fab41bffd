#include "scaletrain/nn/parameters.hpp"

#include "scaletrain/core/error.hpp"

namespace scaletrain::nn {

void ParameterSet::check_new_name(const std::string& name) const {
  ST_CHECK(!finalized_, "parameter " << name << " registered after the model was finalized");
  for (const auto& p : params_) ST_CHECK(p.name != name, "duplicate parameter name " << name);
  for (const auto& b : buffers_) ST_CHECK(b.name != name, "duplicate buffer name " << name);
}

int ParameterSet::add_parameter(const std::string& name, const Shape& shape) {
  check_new_name(name);
  params_.push_back({name, shape, param_elems_});
  frozen_.push_back(0);
  lookup_only_.push_back(0);
  param_elems_ += shape_numel(shape);
  return static_cast<int>(params_.size()) - 1;
}

int ParameterSet::add_buffer(const std::string& name, const Shape& shape) {
  check_new_name(name);
  buffers_.push_back({name, shape, buffer_elems_});
  buffer_elems_ += shape_numel(shape);
  return static_cast<int>(buffers_.size()) - 1;
}

void ParameterSet::set_frozen(int i, bool frozen) {
  ST_CHECK(i >= 0 && i < num_parameters(), "set_frozen: no parameter " << i);
  frozen_[i] = frozen ? 1 : 0;
}

void ParameterSet::set_lookup_only(int i) {
  ST_CHECK(i >= 0 && i < num_parameters(), "set_lookup_only: no parameter " << i);
  ST_CHECK(params_[i].shape.size() == 2,
           "set_lookup_only: " << params_[i].name << " is not a table of rows (" << params_[i].shape.size() << "-D)");
  lookup_only_[i] = 1;
}

std::vector<std::pair<int64_t, int64_t>> ParameterSet::trained_ranges() const { return ranges_of(false); }
std::vector<std::pair<int64_t, int64_t>> ParameterSet::trained_dense_ranges() const { return ranges_of(true); }

std::vector<std::pair<int64_t, int64_t>> ParameterSet::ranges_of(bool skip_lookup_only) const {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    if (frozen_[i] || (skip_lookup_only && lookup_only_[i])) continue;
    const int64_t first = params_[i].offset, end = first + shape_numel(params_[i].shape);
    if (!ranges.empty() && ranges.back().second == first)
      ranges.back().second = end;
    else if (end > first)
      ranges.emplace_back(first, end);
  }
  return ranges;
}

void ParameterSet::finalize(Device device) {
  ST_CHECK(!finalized_, "ParameterSet finalized twice");
  flat_values_ = Tensor::zeros({param_elems_}, DType::f32, device);
  flat_grads_ = Tensor::zeros({param_elems_}, DType::f32, device);
  flat_buffers_ = Tensor::zeros({buffer_elems_}, DType::f32, device);
  for (const auto& p : params_) {
    values_.push_back(Tensor::view_of(flat_values_, p.offset, p.shape));
    grads_.push_back(Tensor::view_of(flat_grads_, p.offset, p.shape));
  }
  for (const auto& b : buffers_) buffer_values_.push_back(Tensor::view_of(flat_buffers_, b.offset, b.shape));
  finalized_ = true;
}

void ParameterSet::move_to(Device device) {
  ST_CHECK(finalized_, "ParameterSet moved before it was finalized");
  if (flat_values_.device() == device) return;
  flat_values_ = flat_values_.to(device);
  flat_grads_ = flat_grads_.to(device);
  flat_buffers_ = flat_buffers_.to(device);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    values_[i] = Tensor::view_of(flat_values_, params_[i].offset, params_[i].shape);
    grads_[i] = Tensor::view_of(flat_grads_, params_[i].offset, params_[i].shape);
  }
  for (std::size_t i = 0; i < buffers_.size(); ++i)
    buffer_values_[i] = Tensor::view_of(flat_buffers_, buffers_[i].offset, buffers_[i].shape);
}

Tensor* ParameterSet::find(const std::string& name) {
  for (std::size_t i = 0; i < params_.size(); ++i)
    if (params_[i].name == name) return &values_.at(i);
  for (std::size_t i = 0; i < buffers_.size(); ++i)
    if (buffers_[i].name == name) return &buffer_values_.at(i);
  return nullptr;
}

std::vector<TensorInfo> ParameterSet::state_infos() const {
  std::vector<TensorInfo> all = params_;
  all.insert(all.end(), buffers_.begin(), buffers_.end());
  return all;
}

FlatLayout ParameterSet::gradient_layout() {
  ST_CHECK(finalized(), "gradient_layout(): the ParameterSet is not finalized");
  FlatLayout layout;
  layout.flat = &flat_grads_;
  for (int i = 0; i < num_parameters(); ++i) {
    const TensorInfo& info = parameter_info(i);
    layout.segments.push_back({info.name, info.offset, shape_numel(info.shape)});
  }
  return layout;
}

}  // namespace scaletrain::nn
