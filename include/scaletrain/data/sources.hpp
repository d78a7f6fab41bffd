// Where datasets come from before they are in our format: the idx files of MNIST-style
// datasets (Fashion-MNIST as packaged by Debian's dataset-fashion-mnist, gzip-compressed or
// not), the directory tree of ImageNet, and a deterministic synthetic image-classification
// generator for tests and benchmarks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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
// data is learnable. The prototype has one random value per channel and per `prototype_cell` x
// `prototype_cell` block of pixels (1: every pixel its own value): a class is then a coarse
// pattern of coloured blocks, which convolutions and pooling keep, where a per-pixel pattern
// survives them only as a faint trace. Depends only on (seed, split_id, index, shape, classes,
// prototype_cell): the same data for any number of shards or ranks. images: count * h * w * c
// bytes; labels: count values.
void synthetic_samples(uint64_t seed, int split_id, int64_t first_index, int64_t count, int h, int w, int c,
                       int classes, uint8_t* images, int32_t* labels, int prototype_cell = 1);

// One image file of a directory tree and its label.
struct ImageFile {
  std::string path;
  int32_t label = 0;
};

// The standard ImageNet layout (docs/dataset-format.md, "ImageNet"):
//   ROOT/train/<wnid>/*.JPEG                      classes = the sorted wnids, label = index
//   ROOT/val/<wnid>/*.JPEG                        labels from the directory names, or
//   ROOT/val/*.JPEG + a labels file               one "FILE LABEL" or "FILE,LABEL..." per line
// Image files are *.JPEG, *.jpg, *.jpeg (any case). In the labels file FILE is a file name in
// val/ (with or without its extension), LABEL a wnid or a class index; a first line that does
// not name a file (e.g. LOC_val_solution.csv's "ImageId,PredictionString") is skipped, so that
// Kaggle's LOC_val_solution.csv works as is. Samples are sorted by path (train: class, then file
// name), so the order is deterministic.
struct ImageNetTree {
  std::vector<std::string> classes;  // wnids, sorted
  std::vector<ImageFile> train, val;
};

// Throws scaletrain::Error naming the directory or file: no train/, a class without images, no
// val/, val/*.JPEG without a labels file, a val class or label not among the training classes,
// a val image missing from the labels file.
ImageNetTree scan_imagenet(const std::string& root, const std::string& val_labels_file = "");

}  // namespace scaletrain::data
