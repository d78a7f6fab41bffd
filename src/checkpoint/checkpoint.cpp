// HDF5 checkpoints (format: docs/checkpoint-format.md) through the io::H5File layer.
// Decisions: read and verify the whole file (format, checksum) before touching any weight, so a
// failed load leaves the model as it was; report every mismatch at once (a renamed layer shows up
// as one missing plus one unexpected tensor); publish by rename after fsync, as report.json is.
// The checksum is zlib's CRC-32 over every dataset's bytes in path order and then the run state,
// so h5py can verify a file with a few lines (docs/checkpoint-format.md). On top of it, the file
// is sealed (io/file_checksum.hpp): its size and XXH3-64 sit in an HDF5 user block and are checked
// before HDF5 opens the file, because libhdf5 can crash or hang on damaged metadata.
#include "scaletrain/checkpoint/checkpoint.hpp"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>
#include <vector>

#include "scaletrain/checkpoint/run_directory.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/progress.hpp"
#include "scaletrain/io/file_checksum.hpp"
#include "scaletrain/io/hdf5.hpp"

namespace scaletrain::checkpoint {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFormatAttr = "scaletrain_checkpoint_format";
constexpr const char* kChecksumAttr = "checksum_crc32";
constexpr const char* kStateAttr = "state";
constexpr const char* kModelGroup = "model";
constexpr const char* kOptimizerGroup = "optimizer";
constexpr const char* kRunGroup = "run";
// /optimizer's attribute for Optimizer::steps() (PyTorch's name for it in an optimizer's state).
constexpr const char* kOptimizerStepAttr = "step";
constexpr int kMaxListed = 8;  // problems listed by name in one error message

// "optimizer/<parameter>" (the momentum) or "optimizer/<parameter>.<key>" (an extra_state() buffer).
std::string optimizer_tensor(const std::string& parameter, const std::string& key = "") {
  return std::string(kOptimizerGroup) + "/" + parameter + (key.empty() ? "" : "." + key);
}

bool ignored_entry(const std::string& name) {
  const std::string suffix = "num_batches_tracked";
  return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// fsync of a directory, so that a rename in it is durable; a failure only weakens the guarantee
// (some file systems refuse directory fsync). The file itself is synced by io::seal_file.
void fsync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

std::string parent_or_dot(const std::string& path) {
  const fs::path dir = fs::path(path).parent_path();
  return dir.empty() ? std::string(".") : dir.string();
}

// "; 12.3 MB free on the file system of DIR", or "" when statvfs fails.
std::string free_space_note(const std::string& dir) {
  struct statvfs s {};
  if (::statvfs(dir.c_str(), &s) != 0) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f MB", static_cast<double>(s.f_bavail) * s.f_frsize / 1e6);
  return std::string("; ") + buf + " free on the file system of " + dir;
}

// The operating system's reason inside HDF5's account of a failed write ("... errno = 28, error
// message = 'No space left on device', ..."), or the whole text when it has none.
std::string write_failure_reason(const std::string& text) {
  const std::string key = "error message = '";
  const std::size_t at = text.find(key);
  if (at == std::string::npos) return text;
  const std::size_t end = text.find('\'', at + key.size());
  return text.substr(at + key.size(), end == std::string::npos ? std::string::npos : end - at - key.size()) + " (" +
         text + ")";
}

// The checksum of a file's contents: every dataset in path order, then the run state. The bytes
// are cut into pieces of at most 4 MiB whose CRCs are computed in parallel and joined in order
// (crc32_combine), so the checksum costs a fraction of the write on a node's idle cores.
uint32_t contents_crc32(const std::map<std::string, Tensor>& tensors, const std::string& run_state) {
  constexpr std::size_t kPiece = std::size_t{4} << 20;
  struct Piece {
    const Bytef* data;
    uInt size;
    uLong crc;
  };
  std::vector<Piece> pieces;
  for (const auto& entry : tensors) {
    const auto* p = static_cast<const Bytef*>(entry.second.raw());
    for (std::size_t at = 0, n = entry.second.bytes(); at < n; at += kPiece)
      pieces.push_back({p + at, static_cast<uInt>(std::min(kPiece, n - at)), 0});
  }
  pieces.push_back({reinterpret_cast<const Bytef*>(run_state.data()), static_cast<uInt>(run_state.size()), 0});
  const int64_t count = static_cast<int64_t>(pieces.size());
#pragma omp parallel for schedule(dynamic)
  for (int64_t i = 0; i < count; ++i) pieces[i].crc = crc32(crc32(0L, Z_NULL, 0), pieces[i].data, pieces[i].size);
  uLong crc = crc32(0L, Z_NULL, 0);
  for (const Piece& piece : pieces) crc = crc32_combine(crc, piece.crc, static_cast<z_off_t>(piece.size));
  return static_cast<uint32_t>(crc);
}

// Everything that goes into the file, by dataset path (sorted: the checksum's order). Each
// tensor is a view of a host copy of its flat buffer: one copy per buffer from a GPU, none on the
// CPU (to() shares a tensor that is there already), so the file is the same whichever device
// trained.
std::map<std::string, Tensor> file_tensors(nn::ParameterSet& p, const SaveOptions& o) {
  std::map<std::string, Tensor> out;
  const Tensor values = p.flat_values().to(Device::cpu);
  for (int i = 0; i < p.num_parameters(); ++i) {
    const nn::TensorInfo& info = p.parameter_info(i);
    out[std::string(kModelGroup) + "/" + info.name] = Tensor::view_of(values, info.offset, info.shape);
  }
  const Tensor buffers = (o.buffers ? *o.buffers : p.flat_buffers()).to(Device::cpu);
  for (int i = 0; i < p.num_buffers(); ++i) {
    const nn::TensorInfo& info = p.buffer_info(i);
    out[std::string(kModelGroup) + "/" + info.name] = Tensor::view_of(buffers, info.offset, info.shape);
  }
  if (o.optimizer != nullptr) {
    const Tensor momentum = o.optimizer->momentum_buffer().to(Device::cpu);
    for (int i = 0; i < p.num_parameters(); ++i)
      out[optimizer_tensor(p.parameter_info(i).name)] = o.optimizer->state_view(momentum, i);
    for (const optim::Optimizer::StateBuffer& extra : o.optimizer->extra_state()) {
      const Tensor state = extra.flat->to(Device::cpu);
      for (int i = 0; i < p.num_parameters(); ++i)
        out[optimizer_tensor(p.parameter_info(i).name, extra.key)] = o.optimizer->state_view(state, i);
    }
  }
  if (o.run != nullptr)
    for (const auto& [name, t] : o.run->tensors) out[std::string(kRunGroup) + "/" + name] = t.to(Device::cpu);
  return out;
}

void write_file(const std::string& tmp, const CheckpointMeta& meta, const std::map<std::string, Tensor>& tensors,
                const SaveOptions& o) {
  const std::string run_state = o.run ? o.run->state : std::string();
  io::H5File file(tmp, io::H5File::Mode::create_truncate, io::kSealBytes);
  file.set_attribute(kFormatAttr, static_cast<int64_t>(kCheckpointFormat));
  file.set_attribute("model", meta.model);
  file.set_attribute("epoch", meta.epoch);
  file.set_attribute("step", meta.step);
  file.set_attribute(kChecksumAttr, static_cast<int64_t>(contents_crc32(tensors, run_state)));
  file.create_group(kModelGroup);
  if (o.optimizer != nullptr) {
    file.create_group(kOptimizerGroup);
    // The step count (Adam's bias correction depends on it), then the optimizer's own account of
    // itself: kind (sgd, lars, adam, lazy_adam) and its hyper-parameters.
    file.set_attribute(kOptimizerStepAttr, o.optimizer->steps(), kOptimizerGroup);
    const Json described = o.optimizer->describe();
    for (const auto& [key, value] : described.items()) {
      const std::string name = key == "name" ? "kind" : key;
      if (value.type() == Json::Type::string)
        file.set_attribute(name, value.as_string(), kOptimizerGroup);
      else if (value.type() == Json::Type::boolean)
        file.set_attribute(name, static_cast<int64_t>(value.as_bool()), kOptimizerGroup);
      else if (value.type() == Json::Type::integer)
        file.set_attribute(name, value.as_int(), kOptimizerGroup);
      else if (value.type() == Json::Type::number)
        file.set_double_attribute(name, value.as_double(), kOptimizerGroup);
    }
  }
  if (o.run != nullptr) {
    file.create_group(kRunGroup);
    file.set_attribute(kStateAttr, run_state, kRunGroup);
  }
  for (const auto& [name, t] : tensors) {
    file.write(name, t);
    progress::tick();  // a long write on a slow file system is not a stall
  }
  file.flush();
  file.close();
}

CheckpointMeta read_meta(const io::H5File& file) {
  const std::string& path = file.path();
  ST_CHECK(file.has_attribute(kFormatAttr),
           "checkpoint " << path << " is not a scaletrain checkpoint (no " << kFormatAttr << " attribute)");
  CheckpointMeta meta;
  const int64_t format = file.get_int_attribute(kFormatAttr);
  ST_CHECK(format == 1 || format == kCheckpointFormat, "checkpoint " << path << " has format " << format
                                                                     << ", this build reads formats 1 and "
                                                                     << kCheckpointFormat);
  meta.format = static_cast<int>(format);
  meta.model = file.get_string_attribute("model");
  meta.epoch = file.get_int_attribute("epoch");
  meta.step = file.get_int_attribute("step");
  return meta;
}

// Opens a checkpoint with HDF5 only after its seal, when it has one, matched its bytes.
io::H5File open_checkpoint(const std::string& path) {
  std::error_code ec;
  ST_CHECK(fs::exists(path, ec), "checkpoint " << path << " not found");
  ST_CHECK(!fs::is_directory(path, ec), "checkpoint " << path << " is a directory without checkpoints");
  io::check_seal(path, "checkpoint");
  return io::H5File(path, io::H5File::Mode::read);
}

// Reads every dataset directly under `group` into out (as "group/name").
void read_group(const io::H5File& file, const std::string& group, std::map<std::string, Tensor>& out) {
  if (!file.has(group)) return;
  for (const std::string& name : file.list(group)) {
    const std::string full = group + "/" + name;
    if (!file.is_dataset(full) || ignored_entry(name)) continue;
    const std::string type = file.dataset_type(full);
    ST_CHECK(type.rfind("float", 0) == 0,
             "checkpoint " << file.path() << ": tensor " << full << " is " << type << ", expected float32");
    out[full] = file.read(full, DType::f32);
    progress::tick();
  }
}

// Compares the tensors of `group` with the expected (name, shape) entries; one line per problem.
std::vector<std::string> mismatches(const CheckpointData& data, const std::string& group,
                                    const std::vector<nn::TensorInfo>& expected) {
  std::vector<std::string> problems;
  std::set<std::string> known;
  for (const nn::TensorInfo& info : expected) {
    const std::string name = group + "/" + info.name;
    known.insert(name);
    const auto it = data.tensors.find(name);
    if (it == data.tensors.end()) {
      problems.push_back("missing tensor /" + name + " " + shape_string(info.shape));
    } else if (it->second.shape() != info.shape) {
      problems.push_back("tensor /" + name + " has shape " + shape_string(it->second.shape()) +
                         " in the checkpoint, the model expects " + shape_string(info.shape));
    }
  }
  const std::string prefix = group + "/";
  for (const auto& entry : data.tensors)
    if (entry.first.rfind(prefix, 0) == 0 && !known.count(entry.first))
      problems.push_back("unexpected tensor /" + entry.first);
  return problems;
}

std::string join_problems(const std::vector<std::string>& problems) {
  std::ostringstream os;
  for (std::size_t i = 0; i < problems.size() && i < kMaxListed; ++i) os << "\n  " << problems[i];
  if (problems.size() > kMaxListed) os << "\n  ... and " << problems.size() - kMaxListed << " more";
  return os.str();
}

// The tensors of /optimizer for optimizer: the momentum of every parameter, then each of its
// extra_state() buffers ("<name>.<key>").
std::vector<nn::TensorInfo> optimizer_infos(const nn::ParameterSet& params, optim::Optimizer& optimizer) {
  std::vector<nn::TensorInfo> infos;
  for (int i = 0; i < params.num_parameters(); ++i) infos.push_back(params.parameter_info(i));
  for (const optim::Optimizer::StateBuffer& extra : optimizer.extra_state())
    for (int i = 0; i < params.num_parameters(); ++i) {
      nn::TensorInfo info = params.parameter_info(i);
      info.name += "." + extra.key;
      infos.push_back(info);
    }
  return infos;
}

// Refuses optimizer state that optimizer cannot continue from: another optimizer's (its "kind"),
// or without the optimizer's extra state (an Adam resume from an SGD or pre-Adam file).
void check_optimizer_state(const CheckpointData& data, const nn::ParameterSet& params, optim::Optimizer& optimizer) {
  const std::string& path = data.path;
  ST_CHECK(data.optimizer_kind.empty() || data.optimizer_kind == optimizer.name(),
           "checkpoint " << path << " holds the state of optimizer " << data.optimizer_kind << ", not "
                         << optimizer.name() << " (a run cannot switch optimizers; --init-from starts a new run from "
                         << "its weights)");
  if (params.num_parameters() == 0) return;
  for (const optim::Optimizer::StateBuffer& extra : optimizer.extra_state()) {
    const std::string first = optimizer_tensor(params.parameter_info(0).name, extra.key);
    ST_CHECK(data.tensors.count(first), "checkpoint " << path << " has no " << optimizer.name() << " state "
                                                      << extra.key << " (e.g. /" << first
                                                      << "): written by another optimizer or an "
                                                      << "older scaletrain, it cannot continue an " << optimizer.name()
                                                      << " run (--init-from starts a new run from its weights)");
  }
}

}  // namespace

void save_checkpoint(const std::string& path, const CheckpointMeta& meta, nn::ParameterSet& params,
                     const SaveOptions& options) {
  ST_CHECK(params.finalized(), "cannot checkpoint a model whose parameters are not finalized");
  ST_CHECK(options.optimizer == nullptr || &options.optimizer->params() == &params,
           "checkpoint: the optimizer belongs to another ParameterSet");
  ST_CHECK(options.buffers == nullptr || options.buffers->numel() == params.flat_buffers().numel(),
           "checkpoint: the buffer values do not match the model's buffers");
  const std::string tmp = path + ".tmp";
  try {
    write_file(tmp, meta, file_tensors(params, options), options);
    io::seal_file(tmp);  // and syncs it
    ST_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0,
             "cannot publish it: rename from " << tmp << ": " << std::strerror(errno));
  } catch (const std::exception& e) {
    std::remove(tmp.c_str());  // never leave a partial file behind
    ST_THROW("cannot write checkpoint " << path << ": " << write_failure_reason(error_text(e))
                                        << free_space_note(parent_or_dot(path))
                                        << "; the previous checkpoint, if any, is unchanged");
  }
  fsync_directory(parent_or_dot(path));
}

bool CheckpointData::has_group(const std::string& group) const {
  const auto it = tensors.lower_bound(group + "/");
  return it != tensors.end() && it->first.rfind(group + "/", 0) == 0;
}

CheckpointMeta read_checkpoint_meta(const std::string& path) { return read_meta(open_checkpoint(path)); }

CheckpointData read_checkpoint(const std::string& path) {
  io::H5File file = open_checkpoint(path);
  CheckpointData data;
  data.path = path;
  data.meta = read_meta(file);
  read_group(file, kModelGroup, data.tensors);
  read_group(file, kOptimizerGroup, data.tensors);
  read_group(file, kRunGroup, data.tensors);
  if (file.has(kRunGroup) && file.has_attribute(kStateAttr, kRunGroup))
    data.run_state = file.get_string_attribute(kStateAttr, kRunGroup);
  if (file.has(kOptimizerGroup)) {
    if (file.has_attribute("kind", kOptimizerGroup))
      data.optimizer_kind = file.get_string_attribute("kind", kOptimizerGroup);
    if (file.has_attribute(kOptimizerStepAttr, kOptimizerGroup))
      data.optimizer_step = file.get_int_attribute(kOptimizerStepAttr, kOptimizerGroup);
  }
  data.has_checksum = file.has_attribute(kChecksumAttr);
  ST_CHECK(data.has_checksum || data.meta.format == 1, "checkpoint " << path << " is damaged: format "
                                                                     << data.meta.format << " without its "
                                                                     << kChecksumAttr << " attribute");
  if (data.has_checksum) {
    const int64_t stored = file.get_int_attribute(kChecksumAttr);
    const uint32_t computed = contents_crc32(data.tensors, data.run_state);
    ST_CHECK(stored == static_cast<int64_t>(computed), "checkpoint " << path << " is damaged: its contents have CRC-32 "
                                                                     << computed << ", the file records " << stored);
  }
  return data;
}

void restore_model(const CheckpointData& data, const std::string& expected_model, nn::ParameterSet& params,
                   optim::Optimizer* optimizer) {
  ST_CHECK(params.finalized(), "cannot load a checkpoint into parameters that are not finalized");
  ST_CHECK(optimizer == nullptr || &optimizer->params() == &params,
           "checkpoint: the optimizer belongs to another ParameterSet");
  const std::string& path = data.path;
  ST_CHECK(expected_model.empty() || data.meta.model == expected_model,
           "checkpoint " << path << " is for model " << data.meta.model << ", not " << expected_model);
  ST_CHECK(data.has_group(kModelGroup), "checkpoint " << path << " has no /" << kModelGroup << " tensors");

  std::vector<std::string> problems = mismatches(data, kModelGroup, params.state_infos());
  const bool load_optimizer = optimizer != nullptr && data.has_group(kOptimizerGroup);
  if (load_optimizer) {
    check_optimizer_state(data, params, *optimizer);
    std::vector<std::string> more = mismatches(data, kOptimizerGroup, optimizer_infos(params, *optimizer));
    problems.insert(problems.end(), more.begin(), more.end());
  }
  ST_CHECK(problems.empty(),
           "checkpoint " << path << " does not match model " << data.meta.model << ":" << join_problems(problems));

  for (const nn::TensorInfo& info : params.state_infos())
    params.find(info.name)->copy_from(data.tensors.at(std::string(kModelGroup) + "/" + info.name));
  if (load_optimizer) {
    for (int i = 0; i < params.num_parameters(); ++i) {
      Tensor target = optimizer->momentum_view(i);
      target.copy_from(data.tensors.at(optimizer_tensor(params.parameter_info(i).name)));
    }
    for (const optim::Optimizer::StateBuffer& extra : optimizer->extra_state())
      for (int i = 0; i < params.num_parameters(); ++i) {
        Tensor target = optimizer->state_view(*extra.flat, i);
        target.copy_from(data.tensors.at(optimizer_tensor(params.parameter_info(i).name, extra.key)));
      }
    // Files from before the "step" attribute: the run's step is the optimizer's (one per step).
    optimizer->restore_steps(data.optimizer_step >= 0 ? data.optimizer_step : data.meta.step);
  }
}

CheckpointMeta load_checkpoint(const std::string& path, const std::string& expected_model, nn::ParameterSet& params,
                               optim::Optimizer* optimizer) {
  const CheckpointData data = read_newest_checkpoint(path);
  restore_model(data, expected_model, params, optimizer);
  return data.meta;
}

}  // namespace scaletrain::checkpoint
