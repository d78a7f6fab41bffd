// The trainer in process (train::run_training on every rank): a run's report and checkpoint
// describe the run (steps, segments, the run state in /run); a run cut by --max-steps and resumed
// ends with every tensor of its checkpoint bitwise equal to an uninterrupted run's (global and
// shard shuffling, with or without checkpoints along the way); a checkpoint
// of another run is refused with a usage error on every rank, naming the difference; an output
// directory with checkpoints is refused without --resume; a finished run resumed does nothing.
// ST_MPI_RANKS: 1 2
#include <mpi.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cstring>
#include <filesystem>

#include "scaletrain/checkpoint/run_directory.hpp"
#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/data/dataset.hpp"
#include "scaletrain/data/sources.hpp"
#include "scaletrain/io/hdf5.hpp"
#include "scaletrain/train/trainer.hpp"

namespace fs = std::filesystem;
using namespace scaletrain;

namespace {

constexpr int kClasses = 4, kSize = 8, kChannels = 3;

// Rank 0 writes a small synthetic dataset (2 train shards, 1 val shard) into a fresh directory
// whose name every rank learns.
struct Workspace {
  comm::Communicator comm = comm::Communicator::world();
  std::string dir;
  Workspace() {
    io::h5_silence_errors();
    if (comm.rank() == 0) {
      dir = (fs::temp_directory_path() / ("scaletrain_test_trainer_" + std::to_string(::getpid()))).string();
      fs::remove_all(dir);
      write_split("train", 0, {96, 64});
      write_split("val", 1, {32});
    }
    comm.broadcast(dir, 0);
  }
  ~Workspace() {
    comm.barrier();
    if (comm.rank() == 0) fs::remove_all(dir);
  }
  void write_split(const std::string& split, int split_id, const std::vector<int64_t>& shards) {
    fs::create_directories(fs::path(dir) / "data" / split);
    int64_t first = 0;
    for (std::size_t s = 0; s < shards.size(); ++s) {
      const int64_t n = shards[s];
      Tensor images = Tensor::empty({n, kSize, kSize, kChannels}, DType::u8);
      Tensor labels = Tensor::empty({n}, DType::i32);
      data::synthetic_samples(5, split_id, first, n, kSize, kSize, kChannels, kClasses, images.data<uint8_t>(),
                              labels.data<int32_t>());
      data::write_image_shard((fs::path(dir) / "data" / split / data::shard_file_name(s, shards.size())).string(),
                              images, labels, kClasses, {0.5, 0.5, 0.5}, {0.25, 0.25, 0.25});
      first += n;
    }
  }
  // 160 samples, global batch 16 on any rank count: 10 steps per epoch, 20 steps.
  train::TrainConfig config(const std::string& run) const {
    train::TrainConfig c;
    c.model = "resnet20";
    c.data_dir = dir + "/data";
    c.output_dir = dir + "/" + run;
    c.epochs = 2;
    c.batch_size = 16 / comm.size();
    c.threads = 1;
    c.log_every = 0;
    c.data_threads = 2;
    c.base_lr = 0.05;
    return c;
  }
};

// Every dataset of the run's latest checkpoint, read on rank 0.
checkpoint::CheckpointData latest(const std::string& run) { return checkpoint::read_newest_checkpoint(run); }

bool same_tensors(const checkpoint::CheckpointData& a, const checkpoint::CheckpointData& b) {
  if (a.tensors.size() != b.tensors.size()) return false;
  for (const auto& [name, t] : a.tensors) {
    const auto it = b.tensors.find(name);
    if (it == b.tensors.end() || it->second.bytes() != t.bytes() ||
        std::memcmp(it->second.raw(), t.raw(), t.bytes()) != 0) {
      BOOST_TEST_MESSAGE("differs: " << name);
      return false;
    }
  }
  return true;
}

bool usage_error_with(const std::function<void()>& f, const std::string& text) {
  try {
    f();
  } catch (const UsageError& e) {
    const bool ok = std::string(e.what()).find(text) != std::string::npos;
    if (!ok) BOOST_TEST_MESSAGE("message: " << e.what());
    return ok;
  }
  return false;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(trainer)

BOOST_AUTO_TEST_CASE(report_and_checkpoint_describe_the_run) {
  Workspace ws;
  const train::TrainResult r = train::run_training(ws.comm, ws.config("plain"), Json::object());
  BOOST_TEST(train::run_end_name(r.end) == std::string("completed"));
  BOOST_TEST(r.report.at("steps").as_int() == 20);
  BOOST_TEST(r.report.at("world_size").as_int() == ws.comm.size());
  BOOST_TEST(r.report.at("segments").size() == 1u);
  BOOST_TEST(r.report.at("segments").at(0).at("reason").as_string() == "completed");
  BOOST_TEST(r.report.at("epochs").size() == 2u);
  if (ws.comm.rank() == 0) {
    const checkpoint::CheckpointData data = latest(ws.dir + "/plain");
    BOOST_TEST(data.meta.step == 20);
    BOOST_TEST(data.meta.epoch == 2);
    const Json state = Json::parse(data.run_state);
    BOOST_TEST(state.at("position").at("global_step").as_int() == 20);
    BOOST_TEST(state.at("position").at("samples_seen").as_int() == 320);
    BOOST_TEST(state.at("world_size").as_int() == ws.comm.size());
    BOOST_TEST(state.at("identity").at("--model").as_string() == "resnet20");
    BOOST_TEST(data.tensors.count("run/rank_buffers") == (ws.comm.size() > 1 ? 1u : 0u));
  }
}

BOOST_AUTO_TEST_CASE(max_steps_then_resume_equals_an_uninterrupted_run) {
  Workspace ws;
  train::run_training(ws.comm, ws.config("whole"), Json::object());
  train::TrainConfig cut = ws.config("parts");
  cut.max_steps = 7;  // mid-epoch 1, after an evaluation at the cut
  BOOST_TEST(train::run_end_name(train::run_training(ws.comm, cut, Json::object()).end) == std::string("max_steps"));
  train::TrainConfig rest = ws.config("parts");
  rest.resume = "auto";
  const train::TrainResult r = train::run_training(ws.comm, rest, Json::object());
  BOOST_TEST(r.report.at("steps").as_int() == 20);
  BOOST_TEST(r.report.at("restarts").as_int() == 1);
  BOOST_TEST(r.report.at("segments").at(1).at("first_step").as_int() == 7);
  BOOST_TEST(r.report.at("epochs").size() == 2u);  // epoch 1's record, cut at 7 steps, replaced when complete
  BOOST_TEST(r.report.at("epochs").at(0).at("steps").as_int() == 10);
  if (ws.comm.rank() == 0) BOOST_TEST(same_tensors(latest(ws.dir + "/whole"), latest(ws.dir + "/parts")));

  // Resumed again, the finished run has nothing left to do.
  BOOST_TEST(train::run_end_name(train::run_training(ws.comm, rest, Json::object()).end) ==
             std::string("already_complete"));
}

BOOST_AUTO_TEST_CASE(shard_shuffling_resumes_bitwise_too) {
  Workspace ws;
  train::TrainConfig whole = ws.config("whole");
  whole.shuffle_mode = "shard";
  whole.shuffle_buffer = 24;
  whole.checkpoint_every_steps = 4;  // checkpoints along the way must not change the result
  train::run_training(ws.comm, whole, Json::object());
  train::TrainConfig cut = whole;
  cut.output_dir = ws.dir + "/parts";
  cut.checkpoint_every_steps = 0;
  cut.max_steps = 13;  // mid-epoch 2
  train::run_training(ws.comm, cut, Json::object());
  cut.max_steps = 0;
  cut.resume = "auto";
  train::run_training(ws.comm, cut, Json::object());
  if (ws.comm.rank() == 0) BOOST_TEST(same_tensors(latest(ws.dir + "/whole"), latest(ws.dir + "/parts")));
}

BOOST_AUTO_TEST_CASE(refusals_are_usage_errors_on_every_rank) {
  Workspace ws;
  train::TrainConfig c = ws.config("run");
  c.max_steps = 3;
  train::run_training(ws.comm, c, Json::object());
  BOOST_TEST(usage_error_with([&] { train::run_training(ws.comm, c, Json::object()); }, "already holds checkpoints"));
  train::TrainConfig other = ws.config("run");
  other.resume = "auto";
  other.momentum = 0.8;
  other.label_smoothing = 0.1;
  BOOST_TEST(usage_error_with([&] { train::run_training(ws.comm, other, Json::object()); },
                              "--momentum is 0.8 here, 0.9 in the checkpoint"));
  BOOST_TEST(usage_error_with([&] { train::run_training(ws.comm, other, Json::object()); },
                              "--label-smoothing is 0.1 here, 0 in the checkpoint"));
}

BOOST_AUTO_TEST_SUITE_END()
