// A flat buffer cut into named segments: what gradient communication needs of a model's
// parameters (comm/gradient_reducer.hpp), without knowing what a ParameterSet is. nn::ParameterSet
// describes its flat gradient buffer this way (gradient_layout()).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "scaletrain/tensor/tensor.hpp"

namespace scaletrain {

struct FlatSegment {
  std::string name;    // for messages and reports, e.g. "layer1.0.conv1.weight"
  int64_t offset = 0;  // elements from the start of the buffer
  int64_t count = 0;   // elements
};

struct FlatLayout {
  Tensor* flat = nullptr;             // the buffer (must outlive whatever holds the layout)
  std::vector<FlatSegment> segments;  // in the buffer's order, covering it
  int num_segments() const { return static_cast<int>(segments.size()); }
  // Elements in all segments.
  int64_t elements() const {
    int64_t n = 0;
    for (const FlatSegment& s : segments) n += s.count;
    return n;
  }
};

}  // namespace scaletrain
