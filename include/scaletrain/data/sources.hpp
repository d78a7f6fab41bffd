// Where datasets come from before they are in our format: the idx files of MNIST-style
// datasets (Fashion-MNIST as packaged by Debian's dataset-fashion-mnist, gzip-compressed or
// not) and a deterministic synthetic image-classification generator for tests and benchmarks.
#pragma once

#include <cstdint>
#include <string>

#include "scaletrain/tensor/tensor.hpp"

namespace scaletrain::data {

// The idx pair of one split: images u8 (N, H, W, 1) and labels i32 (N).
struct IdxSplit {
  Tensor images, labels;
};

// Reads `<dir>/<prefix>-images-idx3-ubyte[.gz]` and `<dir>/<prefix>-labels-idx1-ubyte[.gz]`
// (prefix "train" or "t10k"), checking magic numbers, sizes and that the counts agree.
IdxSplit read_idx_split(const std::string& dir, const std::string& prefix);

// Synthetic sample `index` of split `split_id` (0 train, 1 val): the label is uniform in
// [0, classes); each byte is the mean of a per-class prototype byte and a noise byte, so that the
// data is learnable. Depends only on (seed, split_id, index, shape, classes): the same data for
// any number of shards or ranks. images: count * h * w * c bytes; labels: count values.
void synthetic_samples(uint64_t seed, int split_id, int64_t first_index, int64_t count, int h, int w, int c,
                       int classes, uint8_t* images, int32_t* labels);

}  // namespace scaletrain::data
