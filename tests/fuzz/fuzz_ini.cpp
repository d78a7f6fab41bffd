// Fuzz target: one damaged --config INI file through `scaletrain train`'s option parsing
// (parse_train_command: Boost's INI reader, the option ranges with file and line, the config
// checks), as `scaletrain train --config FILE --data DIR` runs it before training starts.
#include <string>
#include <vector>

#include "cli/train_options.hpp"
#include "fuzz/fuzz_target.hpp"

namespace scaletrain::fuzz {

const char* target_name() { return "fuzz_ini"; }

void target_init() { init_mpi_once(); }

Result run_input(const uint8_t* data, std::size_t size) {
  const std::string path = scratch_dir() + "/config.ini";
  write_file(path, data, size);
  std::vector<std::string> args = {"train", "--config", path, "--data", scratch_dir() + "/data"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  try {
    train::TrainConfig config;
    std::string config_file;
    (void)cli::parse_train_command(static_cast<int>(argv.size()), argv.data(), config, config_file);
    return {};
  } catch (...) {
    return classify_current_exception(path);
  }
}

const char* known_limit(const std::string&, const std::string&) { return nullptr; }

}  // namespace scaletrain::fuzz
