// Private: the check both gradient reducers make of their DeviceStaging at construction, so that
// a reducer on GPU gradients without a host mirror (or with a mirror of another buffer) is a clear
// error there, not a failed host access in the middle of the first step.
#pragma once

#include "scaletrain/backend/device_staging.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/tensor/flat_layout.hpp"

namespace scaletrain::comm {

inline void check_staging(const FlatLayout& layout, const DeviceStaging* staging, const char* reducer) {
  ST_CHECK(layout.flat != nullptr && layout.flat->defined(),
           "the " << reducer << " gradient reducer needs a flat gradient buffer");
  Tensor& grads = *layout.flat;
  if (staging == nullptr) {
    ST_CHECK(grads.device() == Device::cpu, "the " << reducer << " gradient reducer all-reduces through host memory: "
                                                   << "gradients on " << device_name(grads.device())
                                                   << " need a DeviceStaging of the flat gradients");
    return;
  }
  ST_CHECK(staging->device_data() == grads.raw() && staging->size() == grads.numel(),
           "the " << reducer << " gradient reducer's DeviceStaging mirrors another buffer than the flat gradients ("
                  << staging->size() << " elements, the gradients " << grads.numel() << ")");
}

}  // namespace scaletrain::comm
