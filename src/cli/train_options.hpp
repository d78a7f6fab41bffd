// `scaletrain train`'s option parsing on its own, without the run: the command line, the --config
// INI file under it, the option ranges and the config checks. cmd_train calls it before training;
// the INI fuzz target (tests/fuzz/fuzz_ini.cpp) calls it on damaged config files.
#pragma once

#include <string>

#include "scaletrain/train/config.hpp"

namespace scaletrain::cli {

// Parses argv (after the command word "train") and the --config file it names into `config`
// (config_file: that file's path, or empty). Returns false when --help was asked (help printed).
// Throws UsageError naming the option, and for a value from the config file that file and line.
bool parse_train_command(int argc, char** argv, train::TrainConfig& config, std::string& config_file);

// What `scaletrain train --model MODEL` trains with when no other option is given: the command's
// defaults under the model's own (models/registry.hpp: NCF's Adam, learning rate and batch size).
// scaletrain-advisor calibrate times the step with them.
train::TrainConfig train_defaults(const std::string& model);

}  // namespace scaletrain::cli
