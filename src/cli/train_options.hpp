// `scaletrain train`'s option parsing on its own, without the run: the command line, the --config
// INI file under it, the option ranges and the config checks. cmd_train calls it before training;
// the INI fuzz target (tests/fuzz/fuzz_ini.cpp) calls it on damaged config files.
#pragma once

#include <string>

#include "scaletrain/train/config.hpp"

namespace scaletrain::cli {

// --help of --preprocess (train, eval, calibrate).
inline constexpr const char* kPreprocessHelp =
    "torchvision | caffe: how images become the model's input (image classification only; the default is the "
    "model's own, torchvision where it has none: scaletrain info). torchvision: RGB, (pixel / 255 - mean) / std "
    "with the dataset's mean and std; JPEG datasets: random resized crop and flip in training, shorter side to "
    "size / 0.875 and centre crop in evaluation. caffe (as Caffe's ImageNet models, e.g. bvlc_alexnet, "
    "bvlc_googlenet): BGR, pixel (0..255) minus the per-channel mean B 104, G 117, R 123, no division by a std "
    "(the dataset's mean and std are not used); JPEG datasets: the image squashed to 256x256 (aspect not kept), "
    "then a random --image-size crop and a random mirror in training, the centre crop in evaluation. Raw "
    "datasets keep the augmentation of --no-augment and --crop-padding either way";

// --help of --beam-size and --length-penalty (train, eval).
inline constexpr const char* kBeamSizeHelp =
    "translation models: the evaluation's beam search keeps this many hypotheses per sentence (the MLPerf "
    "reference's 4; 1 = greedy decoding, the most probable token each step); other models refuse it";
inline constexpr const char* kLengthPenaltyHelp =
    "translation models: beam search's length penalty alpha, a finished hypothesis scoring its log probability / "
    "((5 + length) / 6)^alpha (the MLPerf reference's 0.6; 0 = none); other models refuse it";

// Parses argv (after the command word "train") and the --config file it names into `config`
// (config_file: that file's path, or empty). Returns false when --help was asked (help printed).
// Throws UsageError naming the option, and for a value from the config file that file and line.
bool parse_train_command(int argc, char** argv, train::TrainConfig& config, std::string& config_file);

// What `scaletrain train --model MODEL` trains with when no other option is given: the command's
// defaults under the model's own (models/registry.hpp: NCF's Adam, learning rate and batch size).
// scaletrain-advisor calibrate times the step with them.
train::TrainConfig train_defaults(const std::string& model);

}  // namespace scaletrain::cli
