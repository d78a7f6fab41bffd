// HDF5 checkpoints (format: docs/checkpoint-format.md) through the io::H5File layer.
// Decisions: validate the whole file against the model before touching any weight, so a failed
// load leaves the model as it was; report every mismatch at once (a renamed layer shows up as one
// missing plus one unexpected tensor); publish by rename after fsync, as report.json is.
#include "scaletrain/checkpoint/checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>
#include <vector>

#include "scaletrain/core/error.hpp"
#include "scaletrain/io/hdf5.hpp"

namespace scaletrain::checkpoint {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFormatAttr = "scaletrain_checkpoint_format";
constexpr const char* kModelGroup = "/model";
constexpr const char* kOptimizerGroup = "/optimizer";
constexpr int kMaxListed = 8;  // problems listed by name in one error message

bool ignored_entry(const std::string& name) {
  const std::string suffix = "num_batches_tracked";
  return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// fsync of a file or directory by path; a failure on the file is an error, on the directory only
// a weaker guarantee (some file systems refuse directory fsync).
void fsync_path(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) {
    ST_CHECK(directory, "cannot open " << path << " to sync it: " << std::strerror(errno));
    return;
  }
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  ST_CHECK(rc == 0 || directory, "cannot sync " << path << " to disk: " << std::strerror(err));
}

// Compares the datasets of `group` with the expected (name, shape) entries; returns one line per
// problem.
std::vector<std::string> mismatches(const io::H5File& file, const std::string& group,
                                    const std::vector<nn::TensorInfo>& expected) {
  std::vector<std::string> problems;
  std::set<std::string> known;
  for (const nn::TensorInfo& info : expected) {
    known.insert(info.name);
    const std::string name = group + "/" + info.name;
    if (!file.is_dataset(name)) {
      problems.push_back("missing tensor " + name + " " + shape_string(info.shape));
      continue;
    }
    const Shape shape = file.dataset_shape(name);
    if (shape != info.shape)
      problems.push_back("tensor " + name + " has shape " + shape_string(shape) +
                         " in the checkpoint, the model expects " + shape_string(info.shape));
    const std::string type = file.dataset_type(name);
    if (type.rfind("float", 0) != 0) problems.push_back("tensor " + name + " is " + type + ", expected float32");
  }
  for (const std::string& name : file.list(group))
    if (!known.count(name) && !ignored_entry(name)) problems.push_back("unexpected tensor " + group + "/" + name);
  return problems;
}

std::string join_problems(const std::vector<std::string>& problems) {
  std::ostringstream os;
  for (std::size_t i = 0; i < problems.size() && i < kMaxListed; ++i) os << "\n  " << problems[i];
  if (problems.size() > kMaxListed) os << "\n  ... and " << problems.size() - kMaxListed << " more";
  return os.str();
}

std::vector<nn::TensorInfo> parameter_infos(const nn::ParameterSet& params) {
  std::vector<nn::TensorInfo> infos;
  for (int i = 0; i < params.num_parameters(); ++i) infos.push_back(params.parameter_info(i));
  return infos;
}

CheckpointMeta read_meta(const io::H5File& file) {
  const std::string& path = file.path();
  ST_CHECK(file.has_attribute(kFormatAttr),
           "checkpoint " << path << " is not a scaletrain checkpoint (no " << kFormatAttr << " attribute)");
  CheckpointMeta meta;
  const int64_t format = file.get_int_attribute(kFormatAttr);
  ST_CHECK(format == kCheckpointFormat,
           "checkpoint " << path << " has format " << format << ", this build reads format " << kCheckpointFormat);
  meta.format = static_cast<int>(format);
  meta.model = file.get_string_attribute("model");
  meta.epoch = file.get_int_attribute("epoch");
  meta.step = file.get_int_attribute("step");
  return meta;
}

io::H5File open_checkpoint(const std::string& path) {
  std::error_code ec;
  ST_CHECK(fs::exists(path, ec), "checkpoint " << path << " not found");
  return io::H5File(path, io::H5File::Mode::read);
}

}  // namespace

void save_checkpoint(const std::string& path, const CheckpointMeta& meta, nn::ParameterSet& params, optim::Sgd* sgd) {
  ST_CHECK(params.finalized(), "cannot checkpoint a model whose parameters are not finalized");
  ST_CHECK(sgd == nullptr || &sgd->params() == &params, "checkpoint: the optimizer belongs to another ParameterSet");
  const std::string tmp = path + ".tmp";
  try {
    {
      io::H5File file(tmp, io::H5File::Mode::create_truncate);
      file.set_attribute(kFormatAttr, static_cast<int64_t>(kCheckpointFormat));
      file.set_attribute("model", meta.model);
      file.set_attribute("epoch", meta.epoch);
      file.set_attribute("step", meta.step);
      file.create_group(kModelGroup);
      for (int i = 0; i < params.num_parameters(); ++i)
        file.write(std::string(kModelGroup) + "/" + params.parameter_info(i).name, params.value(i));
      for (int i = 0; i < params.num_buffers(); ++i)
        file.write(std::string(kModelGroup) + "/" + params.buffer_info(i).name, params.buffer(i));
      if (sgd != nullptr) {
        file.create_group(kOptimizerGroup);
        file.set_attribute("kind", "sgd", kOptimizerGroup);
        file.set_double_attribute("momentum", sgd->options().momentum, kOptimizerGroup);
        file.set_double_attribute("weight_decay", sgd->options().weight_decay, kOptimizerGroup);
        file.set_attribute("nesterov", static_cast<int64_t>(sgd->options().nesterov), kOptimizerGroup);
        for (int i = 0; i < params.num_parameters(); ++i)
          file.write(std::string(kOptimizerGroup) + "/" + params.parameter_info(i).name, sgd->momentum_view(i));
      }
      file.flush();
      file.close();
    }
    fsync_path(tmp, false);
    ST_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0,
             "cannot publish checkpoint " << path << ": rename from " << tmp << ": " << std::strerror(errno));
  } catch (...) {
    std::remove(tmp.c_str());  // never leave a partial file behind
    throw;
  }
  fs::path dir = fs::path(path).parent_path();
  fsync_path(dir.empty() ? std::string(".") : dir.string(), true);
}

CheckpointMeta read_checkpoint_meta(const std::string& path) { return read_meta(open_checkpoint(path)); }

CheckpointMeta load_checkpoint(const std::string& path, const std::string& expected_model, nn::ParameterSet& params,
                               optim::Sgd* sgd) {
  ST_CHECK(params.finalized(), "cannot load a checkpoint into parameters that are not finalized");
  ST_CHECK(sgd == nullptr || &sgd->params() == &params, "checkpoint: the optimizer belongs to another ParameterSet");
  io::H5File file = open_checkpoint(path);
  const CheckpointMeta meta = read_meta(file);
  ST_CHECK(expected_model.empty() || meta.model == expected_model,
           "checkpoint " << path << " is for model " << meta.model << ", not " << expected_model);
  ST_CHECK(file.has(kModelGroup), "checkpoint " << path << " has no " << kModelGroup << " group");

  std::vector<std::string> problems = mismatches(file, kModelGroup, params.state_infos());
  const bool load_momentum = sgd != nullptr && file.has(kOptimizerGroup);
  if (load_momentum) {
    std::vector<std::string> more = mismatches(file, kOptimizerGroup, parameter_infos(params));
    problems.insert(problems.end(), more.begin(), more.end());
  }
  ST_CHECK(problems.empty(),
           "checkpoint " << path << " does not match model " << meta.model << ":" << join_problems(problems));

  for (const nn::TensorInfo& info : params.state_infos()) {
    Tensor* target = params.find(info.name);
    target->copy_from(file.read(std::string(kModelGroup) + "/" + info.name, DType::f32));
  }
  if (load_momentum) {
    for (int i = 0; i < params.num_parameters(); ++i) {
      Tensor target = sgd->momentum_view(i);
      target.copy_from(file.read(std::string(kOptimizerGroup) + "/" + params.parameter_info(i).name, DType::f32));
    }
  }
  return meta;
}

}  // namespace scaletrain::checkpoint
