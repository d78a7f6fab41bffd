// scaletrain-advisor calibrate: the short one-rank sweep that measures a model and writes its
// calibration file (advisor/calibrate.hpp; docs/scaling-model.md, "Measuring a calibration").
// Every option is checked before the sweep starts, --output's directory included, so that a typo
// costs seconds, not a sweep.
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <tuple>

#include "cli/advisor_commands.hpp"
#include "cli/option_ranges.hpp"
#include "cli/subcommand.hpp"
#include "cli/train_options.hpp"
#include "scaletrain/advisor/calibrate.hpp"
#include "scaletrain/backend/context.hpp"
#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/log.hpp"
#include "scaletrain/data/dataset.hpp"
#include "scaletrain/models/registry.hpp"
#include "scaletrain/train/config.hpp"
#include "scaletrain/train/task.hpp"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace scaletrain::cli {
namespace {

constexpr unsigned kHelpWidth = 110;
constexpr const char* kCommand = "calibrate";

struct CalibrateCommand {
  std::string model, data_dir, output, device_name;
  std::vector<int64_t> batches;           // empty: the model's default
  int image_height = 0, image_width = 0;  // 0: the model's default
  std::string preprocess;                 // empty: the model's default
  double aux_loss_weight = -1.0;          // < 0: the model's default (train's --aux-loss-weight)
  int steps = 5;
  int warmup_steps = 1;
  int threads = 0;
  double bucket_mb = 25.0;
  std::string io = "posix";
  int data_threads = 1;
  int prefetch = 2;
  int input_batches = 20;
  bool verify_data = false, require_checksums = false;  // as train's: checked before libhdf5 reads --data
};

po::options_description calibrate_options(CalibrateCommand& c) {
  const train::TrainConfig trainer;  // the defaults calibrate shares with `scaletrain train`
  c.bucket_mb = trainer.bucket_mb;
  c.io = trainer.io;
  c.data_threads = trainer.data_threads;
  c.prefetch = trainer.data_prefetch;
  po::options_description desc("scaletrain-advisor calibrate", kHelpWidth);
  desc.add_options()("help,h", "print this help")(
      "model", po::value(&c.model)->required(),
      "a model of `scaletrain info` (resnet20, resnet50, alexnet, googlenet, inception_v3, alexnet-caffe, "
      "googlenet-caffe, ncf, transformer, transformer-base, transformer-tiny): the step `scaletrain train --model` "
      "runs, with the model's defaults (its optimizer, learning rate and auxiliary loss weight)")(
      "batches", po::value<std::string>(),
      "per-rank batch sizes to time, comma-separated (default 8,16,32 for resnet20, 2,4,8 for the ImageNet models "
      "(resnet50, alexnet, googlenet, inception_v3 and the Caffe ones), 256,1024,4096 for ncf: cheap on a CPU; two or "
      "more sizes give the curves a fixed and a per-sample part). The Transformers' batches are tokens (as "
      "--batch-tokens), timed on whole pairs of 25 tokens a side (at least 25; default 256,512,1024 for "
      "transformer-tiny, 128,256,512 for the others)")("steps", po::value(&c.steps)->default_value(c.steps),
                                                       "timed steps per batch size (each phase: their median)")(
      "warmup-steps", po::value(&c.warmup_steps)->default_value(c.warmup_steps),
      "untimed steps before them (oneDNN primitive creation, first-touch allocation)")(
      "threads", po::value(&c.threads)->default_value(c.threads), "CPU threads (0 = the node's cores)")(
      "image-size", po::value<std::string>(),
      "H,W: an image model's input size (default: the model's, 224,224 for resnet50, alexnet, googlenet and "
      "googlenet-caffe, 227,227 for alexnet-caffe, 299,299 for inception_v3, 32,32 for resnet20; a raw --data's own "
      "size)")("preprocess", po::value(&c.preprocess), kPreprocessHelp)(
      "aux-loss-weight", po::value<double>(),
      "as train's: the auxiliary heads' loss weight (default: the model's, 0.3 for googlenet and googlenet-caffe, "
      "0.4 for inception_v3); 0 times the step without them (their gradients are still all-reduced), and lets "
      "inception_v3 take inputs below 299x299 (75,75 at least)")(
      "bucket-mb", po::value(&c.bucket_mb)->default_value(c.bucket_mb, "25"),
      "gradient bucket size in MiB, as the trainer's --bucket-mb: the bucket layout and ready times are for it")(
      "data", po::value(&c.data_dir),
      "dataset directory of the model's task (docs/dataset-format.md): time its train split's input pipeline, one "
      "rank, with the trainer's batches, and take its sample count and shape (image size and classes; users and "
      "items; the vocabulary); without it input_samples_per_s is 0 (not measured) and the model's standard dataset "
      "gives train_samples and the shape (ImageNet 1,281,167; CIFAR-10 50,000; MovieLens-20M 99,308,850 with 4 "
      "negatives per positive; WMT17 en-de about 139.5 M target tokens, an estimate, vocabulary 33,708)")(
      "verify-data", po::bool_switch(&c.verify_data),
      "with --data: first compare its shards with its manifest.json (checksums), as train's --verify-data")(
      "require-checksums", po::bool_switch(&c.require_checksums),
      "with --data: refuse a split without manifest.json and, unless --verify-data, shards whose HDF5 metadata has "
      "no checksums or whose 'task'/'encoding' is a variable-length string, as train's --require-checksums")(
      "io", po::value(&c.io)->default_value(c.io),
      "with --data: shard reader, posix | mmap | mpiio | mpiio-collective")(
      "data-threads", po::value(&c.data_threads)->default_value(c.data_threads), "with --data: decode/augment threads")(
      "prefetch", po::value(&c.prefetch)->default_value(c.prefetch), "with --data: batches prepared ahead")(
      "input-batches", po::value(&c.input_batches)->default_value(c.input_batches),
      "with --data: batches of the largest batch size to time (after the first prefetch + 1)")(
      "output", po::value(&c.output)->required(), "the calibration file to write (JSON; docs/scaling-model.md)")(
      "device-name", po::value(&c.device_name),
      "the device as the file names it (default: \"cpu (N threads, <model name of /proc/cpuinfo>)\")");
  return desc;
}

// The ranges of calibrate's own options; the shared ones (--threads, --bucket-mb, --data-threads,
// --prefetch) keep the range they have everywhere (option_ranges.cpp).
// "8,16,32" -> {8, 16, 32}; every item a positive integer, none twice.
std::vector<int64_t> parse_batches(const std::string& text) {
  return parse_count_list("--batches", text, "batch size", int64_t{1} << 20);
}

// "224,224" -> (224, 224).
std::pair<int, int> parse_image_size(const std::string& text) {
  int h = 0, w = 0;
  char comma = 0, rest = 0;
  if (std::sscanf(text.c_str(), "%d%c%d%c", &h, &comma, &w, &rest) != 3 || comma != ',' || h <= 0 || w <= 0 ||
      h > 8192 || w > 8192)
    throw UsageError("--image-size '" + text + "' must be H,W: two integers from 1 to 8192");
  return {h, w};
}

// --output's directory must exist and be writable now, not after the sweep.
void check_output_path(const std::string& output) {
  if (output.empty()) throw UsageError("--output needs a file name");
  const fs::path path(output);
  if (fs::is_directory(path)) throw UsageError("--output " + output + " is a directory; name the file to write");
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  if (!fs::exists(dir)) throw UsageError("--output " + output + ": directory " + dir.string() + " does not exist");
  if (!fs::is_directory(dir)) throw UsageError("--output " + output + ": " + dir.string() + " is not a directory");
  if (::access(dir.c_str(), W_OK) != 0)
    throw UsageError("--output " + output + ": directory " + dir.string() + " is not writable");
}

// --aux-loss-weight as train checks it: finite and >= 0, and 0 for a model without auxiliary heads.
double parse_aux_loss_weight(double weight, const std::string& model) {
  std::ostringstream text;
  text << weight;  // 0.3, not 0.29999999999999999
  if (!std::isfinite(weight) || weight < 0.0)
    throw UsageError("--aux-loss-weight must be a finite value >= 0, got " + text.str());
  if (weight > 0.0 && models::default_aux_loss_weight(model) == 0.0)
    throw UsageError("--aux-loss-weight " + text.str() + ": --model " + model +
                     " has no auxiliary heads (set it to 0)");
  return weight;
}

// Parses argv (argv[0] is "calibrate") and checks every option; --help prints and returns false.
bool parse_calibrate_command(int argc, char** argv, CalibrateCommand& c) {
  po::options_description desc = calibrate_options(c);
  po::variables_map vm;
  if (!parse_subcommand("scaletrain-advisor", kCommand, argc, argv, desc, vm, "--model M --output FILE [options]"))
    return false;
  train::check_model_name(c.model);
  if (vm.count("batches")) c.batches = parse_batches(vm["batches"].as<std::string>());
  advisor::check_model_batches(c.model, c.batches);
  if (vm.count("image-size")) {
    const std::string task = models::model_entry(c.model).task;
    if (task != models::kTaskImageClassification)
      throw UsageError("--image-size: --model " + c.model + " takes no images (its task is " + task + ")");
    std::tie(c.image_height, c.image_width) = parse_image_size(vm["image-size"].as<std::string>());
  }
  if (vm.count("preprocess")) train::check_preprocess(c.preprocess, c.model);
  if (vm.count("aux-loss-weight"))
    c.aux_loss_weight = parse_aux_loss_weight(vm["aux-loss-weight"].as<double>(), c.model);
  check_output_path(c.output);
  if (vm.count("data")) {
    if (c.data_dir.empty()) throw UsageError("--data needs a dataset directory");
    train::check_io_mode(c.io);
    train::check_data_threads(c.data_threads);
  } else if (c.verify_data || c.require_checksums) {
    throw UsageError(std::string(c.verify_data ? "--verify-data" : "--require-checksums") +
                     " checks the shards of --data, which is not given");
  }
  return true;
}

// `scaletrain train --model`'s configuration (the model's defaults: its optimizer, learning rate
// and loss options), with calibrate's data and input options.
train::TrainConfig trainer_config(const CalibrateCommand& c) {
  train::TrainConfig config = train_defaults(c.model);
  // As train: a translation model's batch is --batch-tokens (tokens a side per rank).
  if (models::model_entry(c.model).task == models::kTaskTranslation) config.batch_size = config.batch_tokens;
  config.data_dir = c.data_dir;
  config.io = c.io;
  config.data_threads = c.data_threads;
  config.data_prefetch = c.prefetch;
  config.image_height = c.image_height;
  config.image_width = c.image_width;
  if (!c.preprocess.empty()) config.preprocess = c.preprocess;
  if (c.aux_loss_weight >= 0.0) config.aux_loss_weight = c.aux_loss_weight;
  config.verify_data = c.verify_data;
  config.require_checksums = c.require_checksums;
  return config;
}

// --image-size against a raw --data: the trainer feeds raw images at their stored size, so
// another size would time a step that training never runs.
void check_image_size_fits_data(const CalibrateCommand& c) {
  if (c.image_height == 0 || c.data_dir.empty()) return;
  const data::SplitInfo split = data::open_split(c.data_dir, "train");
  if (split.encoding == "raw" && (c.image_height != split.height || c.image_width != split.width))
    throw UsageError("--image-size " + std::to_string(c.image_height) + "," + std::to_string(c.image_width) +
                     " differs from the " + std::to_string(split.height) + "x" + std::to_string(split.width) +
                     " raw images of --data " + c.data_dir + " (the trainer feeds raw images at their stored size)");
}

// The task whose step is timed: on --data, or on the model's standard dataset's shape (at
// --image-size where given). config must outlive it.
std::unique_ptr<train::Task> open_calibration_task(const CalibrateCommand& c, const train::TrainConfig& config,
                                                   const comm::Communicator& comm) {
  if (!c.data_dir.empty()) {
    std::unique_ptr<train::Task> task = train::open_task(config, comm);  // first: the dataset is of the model's task
    check_image_size_fits_data(c);
    return task;
  }
  train::DataShape shape = advisor::model_defaults(c.model).shape;
  if (c.image_height > 0) {
    shape.height = c.image_height;
    shape.width = c.image_width;
  }
  return train::open_task_of_shape(config, shape);
}

advisor::SweepOptions sweep_options(const CalibrateCommand& c) {
  advisor::SweepOptions o;
  o.batches = c.batches.empty() ? advisor::model_defaults(c.model).batches : c.batches;
  o.steps = c.steps;
  o.warmup_steps = c.warmup_steps;
  o.bucket_mb = c.bucket_mb;
  return o;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", &tm);
  return buf;
}

// The command as typed (argv[0] is "calibrate"), words with spaces quoted.
std::string command_line(int argc, char** argv) {
  std::string out = "scaletrain-advisor";
  for (int i = 0; i < argc; ++i) {
    const std::string word = argv[i];
    out += word.find_first_of(" \t'\"") == std::string::npos ? " " + word : " '" + word + "'";
  }
  return out;
}

std::string count_of(int64_t n, const char* noun) { return std::to_string(n) + " " + noun + (n == 1 ? "" : "s"); }

// "samples" -> "sample", "tokens" -> "token".
std::string singular(const std::string& unit) { return unit.substr(0, unit.size() - 1); }

void log_start(const CalibrateCommand& c, const advisor::SweepOptions& sweep, const train::Task& task, int threads) {
  std::string batches;
  for (int64_t b : sweep.batches) batches += (batches.empty() ? "" : ",") + std::to_string(b);
  const std::string unit = task.work_unit();
  const std::string pairs = unit == "tokens"
                                ? " tokens (whole pairs of " + std::to_string(train::kSyntheticSentenceTokens) +
                                      " tokens a side; the table counts their target tokens)"
                                : "";
  ST_LOG("calibrating " << c.model << " on " << task.describe_shape() << ", batches " << batches << pairs << ": "
                        << sweep.warmup_steps << " warm-up and " << sweep.steps << " timed steps each, "
                        << count_of(threads, "thread"));
  char header[128];
  std::snprintf(header, sizeof header, "%8s %12s %12s %12s %12s", "batch", "forward s", "backward s", "optimizer s",
                (unit + "/s").c_str());
  ST_LOG(header);
}

// The dataset's part of the calibration: with --data, the input pipeline's rate at the sweep's
// largest batch and the train split's sample count; without, the model's standard dataset.
// Returns where train_samples came from, for the source.
std::string add_dataset(advisor::Calibration& cal, const CalibrateCommand& c, const train::Task& task,
                        const comm::Communicator& comm) {
  if (c.data_dir.empty()) {
    const advisor::ModelDefaults defaults = advisor::model_defaults(c.model);
    cal.train_samples = defaults.train_samples;
    return defaults.dataset;
  }
  const std::unique_ptr<train::BatchSource> batches =
      task.training_batches(comm, cal.points.back().batch, /*ranks_on_node=*/1);
  cal.input_samples_per_s =
      advisor::measure_input_rate(*batches, /*skipped=*/c.prefetch + 1, c.input_batches, c.data_dir + "/train");
  cal.train_samples = task.train_work();
  return "--data " + c.data_dir + " train split" + (cal.batch_unit == "tokens" ? "'s target tokens" : "");
}

std::string table_row(const advisor::BatchPoint& p) {
  char line[128];
  std::snprintf(line, sizeof line, "%8lld %12.5f %12.5f %12.5f %12.1f", static_cast<long long>(p.batch), p.forward_s,
                p.backward_s, p.optimizer_s, p.batch / (p.forward_s + p.backward_s + p.optimizer_s));
  return line;
}

void log_summary(const advisor::Calibration& cal, const std::string& output) {
  char line[256];
  const std::string per = singular(cal.batch_unit);
  std::snprintf(line, sizeof line, "fitted: forward %.3g s + %.3g s/%s, backward %.3g s + %.3g s/%s, optimizer %.3g s",
                cal.forward.fixed_s, cal.forward.per_sample_s, per.c_str(), cal.backward.fixed_s,
                cal.backward.per_sample_s, per.c_str(), cal.optimizer_s);
  ST_LOG(line);
  std::snprintf(line, sizeof line,
                "gradients: %lld bytes in %zu bucket%s of up to %g MiB, the first ready at %.2f of backward",
                static_cast<long long>(cal.gradient_bytes), cal.buckets.size(), cal.buckets.size() == 1 ? "" : "s",
                cal.bucket_mb, cal.buckets.front().ready_fraction);
  ST_LOG(line);
  if (cal.input_samples_per_s > 0) {
    std::snprintf(line, sizeof line, "input pipeline: %.1f %s/s (one rank)", cal.input_samples_per_s,
                  cal.batch_unit.c_str());
    ST_LOG(line);
  } else {
    ST_LOG("input pipeline: not measured (no --data)");
  }
  ST_LOG("wrote " << output);
}

}  // namespace

int cmd_advisor_calibrate(int argc, char** argv) {
  CalibrateCommand c;
  if (!parse_calibrate_command(argc, argv, c)) return 0;
  const comm::Communicator comm = comm::Communicator::world();
  if (comm.size() != 1)
    throw UsageError("calibrate measures one rank; this job has " + std::to_string(comm.size()) +
                     " (run it without mpirun/srun, or with one task)");
  const train::TrainConfig config = trainer_config(c);
  const std::unique_ptr<train::Task> task = open_calibration_task(c, config, comm);
  const advisor::SweepOptions sweep = sweep_options(c);
  const int threads = c.threads > 0 ? c.threads : train::default_threads(comm);
  Context ctx(Device::cpu, threads);

  log_start(c, sweep, *task, threads);
  advisor::Calibration cal =
      advisor::run_sweep(ctx, {config, *task}, sweep, [](const advisor::BatchPoint& p) { ST_LOG(table_row(p)); });
  const std::string samples_from = add_dataset(cal, c, *task, comm);
  cal.device = c.device_name.empty() ? advisor::cpu_device_name(threads) : c.device_name;
  cal.source = "scaletrain-advisor calibrate on " + comm.host() + ", " + utc_now() + ", " +
               count_of(threads, "thread") + ", " + command_line(argc, argv) + "; train_samples from " + samples_from;
  advisor::write_calibration(cal, c.output);
  log_summary(cal, c.output);
  return 0;
}

}  // namespace scaletrain::cli
