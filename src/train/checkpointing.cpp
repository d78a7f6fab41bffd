// Checkpoints of the run state (checkpointing.hpp). Decisions: rank 0 alone touches the files
// (on a parallel file system one reader and one writer, not hundreds); tensors travel by
// broadcast, gather and scatter; every failure is agreed (on_rank0_agreed), so all ranks stop
// with rank 0's message. Batch-norm statistics are per rank during training (as in PyTorch DDP),
// so a checkpoint keeps every rank's own besides their mean: a resume on as many ranks then
// continues bit for bit, and a resume on another number starts every rank from the mean.
#include "scaletrain/train/checkpointing.hpp"

#include <filesystem>
#include <fstream>

#include "scaletrain/checkpoint/run_directory.hpp"
#include "scaletrain/comm/agreement.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/log.hpp"
#include "scaletrain/core/progress.hpp"
#include "scaletrain/core/timer.hpp"
#include "scaletrain/models/registry.hpp"

namespace scaletrain::train {
namespace fs = std::filesystem;

namespace {

constexpr const char* kRankBuffers = "rank_buffers";

// Rank 0 creates the output directory and proves it writable.
void create_output_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  ST_CHECK(!ec, "cannot create --output-dir " << dir << ": " << ec.message());
  const std::string probe = (fs::path(dir) / ".scaletrain-write-test").string();
  std::ofstream f(probe);
  ST_CHECK(static_cast<bool>(f), "--output-dir " << dir << " is not writable");
  f.close();
  fs::remove(probe, ec);
}

std::string list_some(const std::vector<std::string>& paths) {
  std::string out;
  for (std::size_t i = 0; i < paths.size() && i < 3; ++i) out += (i ? ", " : "") + paths[i];
  if (paths.size() > 3) out += ", ... (" + std::to_string(paths.size()) + " in all)";
  return out;
}

// Rank 0: what --resume and --overwrite make of the output directory.
std::shared_ptr<const checkpoint::CheckpointData> choose_checkpoint(const TrainConfig& c) {
  create_output_dir(c.output_dir);
  const std::vector<std::string> existing = checkpoint::list_checkpoints(checkpoint::checkpoints_dir(c.output_dir));
  if (c.resume == "never") {
    if (existing.empty()) return nullptr;
    if (!c.overwrite)
      throw UsageError("--output-dir " + c.output_dir + " already holds checkpoints (" + list_some(existing) +
                       "): pass --resume auto to continue that run, or --overwrite to delete them and start a new one");
    std::error_code ec;
    fs::remove_all(checkpoint::checkpoints_dir(c.output_dir), ec);
    ST_CHECK(!ec, "--overwrite: cannot delete " << checkpoint::checkpoints_dir(c.output_dir) << ": " << ec.message());
    fs::remove(fs::path(c.output_dir) / "report.json", ec);
    ST_LOG("--overwrite: deleted the " << existing.size() << " checkpoint(s) of the previous run in " << c.output_dir);
    return nullptr;
  }
  if (c.resume == "auto") {
    if (existing.empty()) {
      ST_LOG("--resume auto: no checkpoint in " << c.output_dir << ", starting a new run");
      return nullptr;
    }
    auto data = std::make_shared<const checkpoint::CheckpointData>(checkpoint::read_newest_checkpoint(c.output_dir));
    // Newer files failed to verify: out of the way, so that retention does not count them.
    for (const std::string& moved : checkpoint::set_aside_newer_checkpoints(c.output_dir, data->meta.step))
      ST_WARN("damaged checkpoint set aside as " << moved);
    return data;
  }
  if (!existing.empty())
    throw UsageError("--resume " + c.resume + ": --output-dir " + c.output_dir + " already holds checkpoints (" +
                     list_some(existing) +
                     "); continue the run there with --resume auto, or choose another --output-dir");
  std::error_code ec;
  if (!fs::exists(c.resume, ec)) throw UsageError("--resume " + c.resume + ": no such file or directory");
  return std::make_shared<const checkpoint::CheckpointData>(checkpoint::read_newest_checkpoint(c.resume));
}

}  // namespace

CheckpointWritten write_checkpoint(const comm::Communicator& comm, RunState& state, const Json& segment,
                                   const std::string& run_dir, int keep) {
  progress::enter("checkpoint");
  nn::ParameterSet& params = state.params();
  // The statistics every rank evaluates with (the mean), and each rank's own.
  Tensor mean = Tensor::empty(params.flat_buffers().shape());
  mean.copy_from(params.flat_buffers());
  Tensor per_rank;
  if (comm.size() > 1 && mean.numel() > 0) {
    comm.allreduce_mean(mean);
    comm.gather(params.flat_buffers(), per_rank, 0);
  }
  Json json = state.to_json(segment);
  json["position"].set("epoch_loss_sum", state.epoch_loss_sum(comm));

  CheckpointWritten written;
  written.path = checkpoint::checkpoint_file(run_dir, state.position.global_step);
  if (comm.rank() != 0) progress::enter("checkpoint (rank 0 writes)", /*waiting=*/true);
  comm::on_rank0_agreed(comm, [&] {
    Stopwatch clock;
    std::error_code ec;
    fs::create_directories(checkpoint::checkpoints_dir(run_dir), ec);
    checkpoint::RunRecord record;
    record.state = json.dump();
    if (per_rank.defined()) record.tensors[kRankBuffers] = per_rank;
    checkpoint::SaveOptions options;
    options.optimizer = &state.optimizer();
    options.buffers = &mean;
    options.run = &record;
    checkpoint::CheckpointMeta meta;
    meta.model = state.model().name();
    meta.epoch = state.position.epoch;
    meta.step = state.position.global_step;
    checkpoint::save_checkpoint(written.path, meta, params, options);
    checkpoint::publish_latest(run_dir, written.path);
    checkpoint::prune_checkpoints(run_dir, keep);
    written.seconds = clock.elapsed();
    written.bytes = static_cast<int64_t>(fs::file_size(written.path, ec));
  });
  written.seconds = comm.allreduce_max(written.seconds);  // rank 0's, on every rank
  written.bytes = comm.allreduce_max(written.bytes);
  return written;
}

std::optional<ResumePoint> prepare_run_directory(const comm::Communicator& comm, const TrainConfig& c) {
  std::shared_ptr<const checkpoint::CheckpointData> data;
  std::string state_text, path;
  comm::on_rank0_agreed(comm, [&] {
    data = choose_checkpoint(c);
    if (!data) return;
    path = data->path;
    if (data->run_state.empty())
      throw UsageError("--resume: checkpoint " + path +
                       " holds weights only (no run state: written by another tool or an older scaletrain); start a "
                       "new run from it with --init-from");
    if (!data->has_group("optimizer"))
      throw UsageError("--resume: checkpoint " + path +
                       " has no optimizer state; start a new run from it with --init-from");
    state_text = data->run_state;
  });
  comm.broadcast(path, 0);
  if (path.empty()) return std::nullopt;
  comm.broadcast(state_text, 0);
  ResumePoint point;
  point.path = path;
  point.state = Json::parse(state_text);
  point.data = data;
  return point;
}

void restore_run(const comm::Communicator& comm, const ResumePoint& point, RunState& state) {
  Json saved = point.state.at("identity");
  if (!saved.contains("--optimizer")) saved.set("--optimizer", "sgd");  // checkpoints from before --optimizer
  const std::vector<std::string> differences = identity_differences(saved, state.identity);
  if (!differences.empty()) {
    std::string message = "--resume: checkpoint " + point.path + " is from another run:";
    for (const std::string& d : differences) message += "\n  " + d;
    throw UsageError(message + "\nstart a new run (--output-dir elsewhere, or --overwrite), or --init-from it");
  }
  ST_CHECK(point.state.at("steps_per_epoch").as_int() == state.steps_per_epoch,
           "--resume: checkpoint " << point.path << " has " << point.state.at("steps_per_epoch").as_int()
                                   << " steps per epoch, this run " << state.steps_per_epoch);
  nn::ParameterSet& params = state.params();
  const bool per_rank_buffers =
      point.world_size() == comm.size() && comm.size() > 1 && params.flat_buffers().numel() > 0;
  comm::on_rank0_agreed(comm, [&] {
    checkpoint::restore_model(*point.data, state.model().name(), params, &state.optimizer());
    if (!per_rank_buffers) return;
    const auto it = point.data->tensors.find(std::string("run/") + kRankBuffers);
    ST_CHECK(
        it != point.data->tensors.end() && it->second.shape() == Shape({comm.size(), params.flat_buffers().numel()}),
        "checkpoint " << point.path << " is damaged: /run/" << kRankBuffers << " does not hold the " << comm.size()
                      << " ranks' batch-norm statistics");
  });
  comm.broadcast(params.flat_values(), 0);
  optim::Optimizer& optimizer = state.optimizer();
  comm.broadcast(optimizer.momentum_buffer(), 0);
  for (const optim::Optimizer::StateBuffer& extra : optimizer.extra_state()) comm.broadcast(*extra.flat, 0);
  optimizer.restore_steps(comm.allreduce_max(comm.rank() == 0 ? optimizer.steps() : int64_t{0}));
  if (per_rank_buffers) {
    const Tensor none;
    comm.scatter(comm.rank() == 0 ? point.data->tensors.at(std::string("run/") + kRankBuffers) : none,
                 params.flat_buffers(), 0);
  } else if (params.flat_buffers().numel() > 0) {
    comm.broadcast(params.flat_buffers(), 0);
  }
  state.restore(point.state);
}

void check_checkpoint_fits(const checkpoint::CheckpointData& data, const std::string& model, int channels,
                           int num_classes, const std::string& data_dir) {
  const models::ModelEntry& entry = models::model_entry(model);
  const auto conv = data.tensors.find("model/" + entry.first_conv_weight);
  if (!entry.first_conv_weight.empty() && conv != data.tensors.end()) {
    const Shape& w = conv->second.shape();
    ST_CHECK(w.size() == 4 && w[1] == channels,
             "dataset " << data_dir << " has " << channels << "-channel images but the model in checkpoint "
                        << data.path << " takes " << (w.size() == 4 ? w[1] : -1) << " channels");
  }
  const auto fc = data.tensors.find("model/" + entry.classifier_weight);
  if (!entry.classifier_weight.empty() && fc != data.tensors.end()) {
    const Shape& w = fc->second.shape();
    ST_CHECK(w.size() == 2 && w[0] == num_classes, "dataset " << data_dir << " has " << num_classes
                                                              << " classes but the model in checkpoint " << data.path
                                                              << " has " << (w.size() == 2 ? w[0] : -1) << " outputs");
  }
}

void load_initial_weights(const comm::Communicator& comm, const TrainConfig& c, const Task& task, RunState& state) {
  comm::on_rank0_agreed(comm, [&] {
    const checkpoint::CheckpointData data = checkpoint::read_newest_checkpoint(c.init_from);
    task.check_fits(data);
    checkpoint::restore_model(data, c.model, state.params(), nullptr);
    ST_LOG("initial weights from " << data.path << " (a new run: step 0, zero momentum)");
  });
  comm.broadcast(state.params().flat_values(), 0);
  if (state.params().flat_buffers().numel() > 0) comm.broadcast(state.params().flat_buffers(), 0);
}

}  // namespace scaletrain::train
