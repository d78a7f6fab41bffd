// Fuzz target: one damaged checkpoint file through what `scaletrain eval --checkpoint` and
// `scaletrain train --resume/--init-from` do with it: read_checkpoint (format, checksum, every
// tensor), the dataset fit check, restore_model into a ResNet-20 of the corpus' shape (3
// channels, 4 classes: tests/fuzz/make_corpus.sh) and the run state's JSON as resume parses it.
#include <memory>

#include "fuzz/fuzz_target.hpp"
#include "scaletrain/checkpoint/checkpoint.hpp"
#include "scaletrain/core/json.hpp"
#include "scaletrain/models/model.hpp"
#include "scaletrain/train/checkpointing.hpp"

namespace scaletrain::fuzz {
namespace {

constexpr int kChannels = 3, kClasses = 4;  // make_corpus.sh's synthetic data

models::Model& model() {
  static std::unique_ptr<models::Model> m = models::make_model("resnet20", kClasses, kChannels);
  return *m;
}

}  // namespace

const char* target_name() { return "fuzz_checkpoint"; }

void target_init() {
  init_mpi_once();
  model();
}

Result run_input(const uint8_t* data, std::size_t size) {
  const std::string path = scratch_dir() + "/step-000000004.h5";
  write_file(path, data, size);
  try {
    const checkpoint::CheckpointData ckpt = checkpoint::read_checkpoint(path);
    train::check_checkpoint_fits(ckpt, "resnet20", kChannels, kClasses, scratch_dir());
    checkpoint::restore_model(ckpt, "resnet20", model().params(), nullptr);
    if (!ckpt.run_state.empty()) (void)Json::parse(ckpt.run_state);
    return {};
  } catch (...) {
    return classify_current_exception(path);
  }
}

const char* known_limit(const std::string&, const std::string&) { return nullptr; }

}  // namespace scaletrain::fuzz
