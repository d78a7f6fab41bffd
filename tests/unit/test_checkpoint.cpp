// Checkpoints: a save/load round trip of a small model with momentum, buffers and a run record
// (bit-exact), the atomic publish (no .tmp left), the checksum (a flipped byte is found, and
// h5py's view of it is checked in tests/python), files written by other tools (format 1), the
// errors for a missing file, a non-checkpoint, another model, another shape, missing and
// unexpected tensors, each checked by its message; and the run directory: names, the `latest`
// pointer, retention, and the newest-valid search that skips damaged files. Adam's whole state
// (both moments and the step count) round-trips so that the next step is bitwise the same, and a
// file of another optimizer, or without Adam's second moment, is refused by name.
#include <fcntl.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "scaletrain/checkpoint/checkpoint.hpp"
#include "scaletrain/checkpoint/run_directory.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/io/file_checksum.hpp"
#include "scaletrain/io/hdf5.hpp"
#include "scaletrain/nn/parameters.hpp"
#include "scaletrain/optim/adam.hpp"
#include "scaletrain/optim/sgd.hpp"
#include "support/gradcheck.hpp"
#include "support/host_backed_device.hpp"

namespace fs = std::filesystem;
using scaletrain::Error;
using scaletrain::Tensor;
using scaletrain::nn::ParameterSet;
using namespace scaletrain::checkpoint;

namespace {

// A resnet-like naming; fc_out changes fc's shape, extra adds a parameter.
ParameterSet make_params(int64_t fc_out = 10, bool extra = false) {
  ParameterSet p;
  p.add_parameter("conv1.weight", {4, 3, 3, 3});
  p.add_parameter("bn1.weight", {4});
  p.add_parameter("bn1.bias", {4});
  p.add_parameter("layer1.0.conv1.weight", {4, 4, 1, 1});
  p.add_parameter("fc.weight", {fc_out, 4});
  p.add_parameter("fc.bias", {fc_out});
  if (extra) p.add_parameter("fc2.bias", {3});
  p.add_buffer("bn1.running_mean", {4});
  p.add_buffer("bn1.running_var", {4});
  p.finalize();
  return p;
}

void fill_pattern(Tensor& t, float scale, float offset) {
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = scale * static_cast<float>(i % 17) + offset;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.numel() == b.numel() && std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

struct TempDir {
  fs::path dir = fs::temp_directory_path() / ("st_checkpoint_test_" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(dir); }
  ~TempDir() { fs::remove_all(dir); }
  std::string file(const std::string& name) const { return (dir / name).string(); }
};

CheckpointMeta meta_of(int64_t epoch, int64_t step) {
  CheckpointMeta m;
  m.model = "resnet20";
  m.epoch = epoch;
  m.step = step;
  return m;
}

// A saved checkpoint of make_params() with momentum; returns its path.
std::string save_reference(const std::string& path, int64_t step = 1234) {
  ParameterSet p = make_params();
  fill_pattern(p.flat_values(), 0.125f, -1.0f);
  fill_pattern(p.buffer(0), 0.5f, 0.0f);
  fill_pattern(p.buffer(1), 0.25f, 1.0f);
  scaletrain::optim::Sgd sgd(p, {});
  fill_pattern(sgd.momentum_buffer(), -0.0625f, 0.5f);
  SaveOptions options;
  options.optimizer = &sgd;
  save_checkpoint(path, meta_of(3, step), p, options);
  return path;
}

// Flips one byte of a dataset's stored values, behind HDF5's back (a failing disk).
void flip_byte(const std::string& path, const std::string& dataset) {
  int64_t offset = 0;
  {
    scaletrain::io::H5File f(path, scaletrain::io::H5File::Mode::read);
    scaletrain::io::H5Dataset d(f, dataset);
    offset = d.row_offset(0);
  }
  const int fd = ::open(path.c_str(), O_RDWR);
  BOOST_REQUIRE(fd >= 0);
  unsigned char byte = 0;
  BOOST_REQUIRE(::pread(fd, &byte, 1, offset) == 1);
  byte ^= 0x10;
  BOOST_REQUIRE(::pwrite(fd, &byte, 1, offset) == 1);
  ::close(fd);
}

auto message_has(const std::string& a, const std::string& b = "", const std::string& c = "") {
  return [=](const Error& e) {
    const std::string m = e.what();
    const bool ok = m.find(a) != std::string::npos && m.find(b) != std::string::npos && m.find(c) != std::string::npos;
    if (!ok) BOOST_TEST_MESSAGE("unexpected message: " << m);
    return ok;
  };
}

// Gradients that differ per step and per element, with both signs.
void set_step_grads(ParameterSet& p, int step) {
  fill_pattern(p.flat_grads(), 0.03125f * static_cast<float>(step + 1), -0.25f);
}

// A make_params() model after `steps` Adam steps, saved to path with its optimizer.
void save_adam(const std::string& path, ParameterSet& p, scaletrain::optim::Adam& adam, int steps) {
  fill_pattern(p.flat_values(), 0.125f, -1.0f);
  for (int s = 0; s < steps; ++s) {
    set_step_grads(p, s);
    adam.step(scaletrain::test::cpu_context(), 0.01);
  }
  SaveOptions options;
  options.optimizer = &adam;
  save_checkpoint(path, meta_of(0, steps), p, options);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(checkpoint)

// Adam's state is both moments and the step count (its bias correction): a fresh Adam restored
// from the file takes the next step bitwise as the original does.
BOOST_AUTO_TEST_CASE(adam_state_round_trips_and_the_next_step_is_bitwise_the_same) {
  TempDir tmp;
  const std::string path = tmp.file("adam.h5");
  ParameterSet src = make_params();
  scaletrain::optim::Adam original(src, {});
  save_adam(path, src, original, 3);
  {
    scaletrain::io::H5File f(path, scaletrain::io::H5File::Mode::read);
    BOOST_TEST(f.is_dataset("/optimizer/fc.weight"));  // exp_avg, as SGD's momentum
    BOOST_TEST(f.dataset_shape("/optimizer/fc.weight.exp_avg_sq") == (scaletrain::Shape{10, 4}));
    BOOST_TEST(f.get_int_attribute("step", "/optimizer") == 3);
    BOOST_TEST(f.get_string_attribute("kind", "/optimizer") == "adam");
  }
  ParameterSet dst = make_params();
  scaletrain::optim::Adam resumed(dst, {});
  restore_model(read_checkpoint(path), "resnet20", dst, &resumed);
  BOOST_TEST(resumed.steps() == 3);
  BOOST_TEST(same_bits(resumed.second_moment_buffer(), original.second_moment_buffer()));
  set_step_grads(src, 3);
  set_step_grads(dst, 3);
  original.step(scaletrain::test::cpu_context(), 0.01);
  resumed.step(scaletrain::test::cpu_context(), 0.01);
  BOOST_TEST(same_bits(dst.flat_values(), src.flat_values()));
  BOOST_TEST(same_bits(resumed.momentum_buffer(), original.momentum_buffer()));
  BOOST_TEST(same_bits(resumed.second_moment_buffer(), original.second_moment_buffer()));

  // Without its state Adam would restart its bias correction: a step from zero state differs.
  ParameterSet fresh = make_params();
  scaletrain::optim::Adam restarted(fresh, {});
  restore_model(read_checkpoint(path), "resnet20", fresh, nullptr);
  set_step_grads(fresh, 3);
  restarted.step(scaletrain::test::cpu_context(), 0.01);
  BOOST_TEST(!same_bits(fresh.flat_values(), src.flat_values()));
}

BOOST_AUTO_TEST_CASE(adam_refuses_state_without_its_second_moment_or_of_another_optimizer) {
  TempDir tmp;
  const std::string adam_path = tmp.file("adam.h5");
  ParameterSet src = make_params();
  scaletrain::optim::Adam original(src, {});
  save_adam(adam_path, src, original, 2);

  // An Adam file without exp_avg_sq (as a file from before Adam's state was stored would be).
  CheckpointData data = read_checkpoint(adam_path);
  for (auto it = data.tensors.begin(); it != data.tensors.end();)
    it = it->first.find(".exp_avg_sq") != std::string::npos ? data.tensors.erase(it) : std::next(it);
  ParameterSet dst = make_params();
  scaletrain::optim::Adam resumed(dst, {});
  BOOST_CHECK_EXCEPTION(restore_model(data, "resnet20", dst, &resumed), Error,
                        message_has(adam_path, "has no adam state exp_avg_sq", "/optimizer/conv1.weight.exp_avg_sq"));
  BOOST_TEST(resumed.steps() == 0);  // nothing was changed

  // SGD's state into Adam, and Adam's into SGD: another optimizer, named.
  const std::string sgd_path = save_reference(tmp.file("sgd.h5"));
  BOOST_CHECK_EXCEPTION(restore_model(read_checkpoint(sgd_path), "resnet20", dst, &resumed), Error,
                        message_has(sgd_path, "state of optimizer sgd, not adam"));
  scaletrain::optim::Sgd sgd(dst, {});
  BOOST_CHECK_EXCEPTION(restore_model(read_checkpoint(adam_path), "resnet20", dst, &sgd), Error,
                        message_has(adam_path, "state of optimizer adam, not sgd"));
  // A file without kind and step (older writers): the step count is the file's step.
  CheckpointData old = read_checkpoint(sgd_path);
  old.optimizer_kind.clear();
  old.optimizer_step = -1;
  restore_model(old, "resnet20", dst, &sgd);
  BOOST_TEST(sgd.steps() == 1234);
}

BOOST_AUTO_TEST_CASE(round_trip_with_momentum_buffers_and_run_record) {
  TempDir tmp;
  ParameterSet src = make_params();
  fill_pattern(src.flat_values(), 0.125f, -1.0f);
  fill_pattern(src.buffer(0), 0.5f, 0.0f);
  fill_pattern(src.buffer(1), 0.25f, 1.0f);
  scaletrain::optim::Sgd src_sgd(src, {});
  fill_pattern(src_sgd.momentum_buffer(), -0.0625f, 0.5f);
  Tensor mean = Tensor::empty(src.flat_buffers().shape());  // stored under /model instead of src's own
  fill_pattern(mean, 3.0f, 0.5f);
  RunRecord record;
  record.state = R"({"position": {"global_step": 1234}, "note": "\u00e9"})";
  record.tensors["rank_buffers"] = Tensor::empty({2, src.flat_buffers().numel()});
  fill_pattern(record.tensors["rank_buffers"], 1.5f, 0.0f);
  const std::string path = tmp.file("ckpt.h5");
  SaveOptions options;
  options.optimizer = &src_sgd;
  options.buffers = &mean;
  options.run = &record;
  save_checkpoint(path, meta_of(3, 1234), src, options);
  BOOST_TEST(fs::exists(path));
  BOOST_TEST(!fs::exists(path + ".tmp"));

  CheckpointMeta meta = read_checkpoint_meta(path);
  BOOST_TEST(meta.format == kCheckpointFormat);
  BOOST_TEST(meta.model == "resnet20");
  BOOST_TEST(meta.epoch == 3);
  BOOST_TEST(meta.step == 1234);

  // The documented layout, read back with the plain HDF5 layer.
  {
    scaletrain::io::H5File f(path, scaletrain::io::H5File::Mode::read);
    BOOST_TEST(f.get_int_attribute("scaletrain_checkpoint_format") == 2);
    BOOST_TEST(f.has_attribute("checksum_crc32"));
    BOOST_TEST(f.dataset_shape("/model/layer1.0.conv1.weight") == (scaletrain::Shape{4, 4, 1, 1}));
    BOOST_TEST(f.dataset_type("/model/fc.weight") == "float32");
    BOOST_TEST(f.is_dataset("/model/bn1.running_var"));
    BOOST_TEST(f.is_dataset("/optimizer/fc.bias"));
    BOOST_TEST(!f.has("/optimizer/bn1.running_var"));  // buffers have no momentum
    BOOST_TEST(f.list("/model").size() == 8u);
    BOOST_TEST(f.get_string_attribute("state", "/run") == record.state);
    BOOST_TEST(f.dataset_shape("/run/rank_buffers") == (scaletrain::Shape{2, 8}));
  }

  const CheckpointData data = read_checkpoint(path);
  BOOST_TEST(data.has_checksum);
  BOOST_TEST(data.run_state == record.state);
  BOOST_TEST(same_bits(data.tensors.at("run/rank_buffers"), record.tensors["rank_buffers"]));
  ParameterSet dst = make_params();
  scaletrain::optim::Sgd dst_sgd(dst, {});
  restore_model(data, "resnet20", dst, &dst_sgd);
  BOOST_TEST(same_bits(dst.flat_values(), src.flat_values()));
  BOOST_TEST(same_bits(dst.flat_buffers(), mean));
  BOOST_TEST(same_bits(dst_sgd.momentum_buffer(), src_sgd.momentum_buffer()));

  // Saving again over the published file replaces it atomically; without an optimizer the file
  // has no /optimizer and loading leaves the momentum as it is.
  fill_pattern(src.flat_values(), 2.0f, 0.0f);
  save_checkpoint(path, meta_of(4, 2000), src);
  BOOST_TEST(!fs::exists(path + ".tmp"));
  ParameterSet again = make_params();
  scaletrain::optim::Sgd again_sgd(again, {});
  fill_pattern(again_sgd.momentum_buffer(), 1.0f, 1.0f);
  const Tensor momentum_before = again_sgd.momentum_buffer().clone();
  meta = load_checkpoint(path, "", again, &again_sgd);
  BOOST_TEST(meta.epoch == 4);
  BOOST_TEST(same_bits(again.flat_values(), src.flat_values()));
  BOOST_TEST(same_bits(again.flat_buffers(), src.flat_buffers()));
  BOOST_TEST(same_bits(again_sgd.momentum_buffer(), momentum_before));
}

// Checkpoints are the same whichever device wrote them: the model and optimizer state moved to a
// device (here one backed by host memory, so the device branch runs without a GPU) write a file
// whose every tensor and checksum equal those of the CPU's file, and such a file loads back into
// state on the device. ParameterSet::move_to keeps each parameter's view at its offset.
BOOST_AUTO_TEST_CASE(a_checkpoint_written_from_device_tensors_is_the_cpus_file) {
  using scaletrain::Device;
  TempDir tmp;
  ParameterSet src = make_params();
  fill_pattern(src.flat_values(), 0.125f, -1.0f);
  fill_pattern(src.flat_buffers(), 0.5f, 0.25f);
  scaletrain::optim::Sgd sgd(src, {});
  fill_pattern(sgd.momentum_buffer(), -0.0625f, 0.5f);
  const std::string on_cpu = tmp.file("cpu.h5"), on_device = tmp.file("device.h5");
  SaveOptions options;
  options.optimizer = &sgd;
  save_checkpoint(on_cpu, meta_of(1, 10), src, options);

  scaletrain::test::HostBackedDevice device;
  src.move_to(Device::cuda);
  sgd.move_state_to(Device::cuda);
  BOOST_TEST((src.value(3).device() == Device::cuda && sgd.momentum_buffer().device() == Device::cuda));
  const Tensor fc_bias = src.value(5).to(Device::cpu);  // the view moved with its offset
  BOOST_TEST(fc_bias.data<float>()[0] == 0.125f * static_cast<float>(src.parameter_info(5).offset % 17) - 1.0f);
  save_checkpoint(on_device, meta_of(1, 10), src, options);
  BOOST_TEST(device.memory().copies_to_host >= 3);  // values, buffers, momentum: one copy each

  const CheckpointData a = read_checkpoint(on_cpu), b = read_checkpoint(on_device);
  BOOST_TEST(a.tensors.size() == b.tensors.size());
  for (const auto& [name, t] : a.tensors) {
    BOOST_TEST_CONTEXT(name) {
      BOOST_REQUIRE(b.tensors.count(name) == 1u);
      BOOST_TEST(same_bits(t, b.tensors.at(name)));
    }
  }
  BOOST_TEST(scaletrain::io::H5File(on_cpu, scaletrain::io::H5File::Mode::read).get_int_attribute("checksum_crc32") ==
             scaletrain::io::H5File(on_device, scaletrain::io::H5File::Mode::read).get_int_attribute("checksum_crc32"));

  // Loaded into state on the device, then brought back: the CPU's values.
  ParameterSet dst = make_params();
  scaletrain::optim::Sgd dst_sgd(dst, {});
  dst.move_to(Device::cuda);
  dst_sgd.move_state_to(Device::cuda);
  restore_model(b, "resnet20", dst, &dst_sgd);
  src.move_to(Device::cpu);
  sgd.move_state_to(Device::cpu);
  dst.move_to(Device::cpu);
  dst_sgd.move_state_to(Device::cpu);
  BOOST_TEST(same_bits(dst.flat_values(), src.flat_values()));
  BOOST_TEST(same_bits(dst.flat_buffers(), src.flat_buffers()));
  BOOST_TEST(same_bits(dst_sgd.momentum_buffer(), sgd.momentum_buffer()));
}

BOOST_AUTO_TEST_CASE(a_flipped_byte_is_found_before_anything_is_loaded) {
  TempDir tmp;
  const std::string path = save_reference(tmp.file("ckpt.h5"));
  BOOST_CHECK_NO_THROW(read_checkpoint(path));
  flip_byte(path, "/optimizer/layer1.0.conv1.weight");
  ParameterSet p = make_params();
  p.flat_values().fill(7.0f);
  BOOST_CHECK_EXCEPTION(load_checkpoint(path, "resnet20", p, nullptr), Error,
                        message_has("checkpoint " + path + " is damaged", "its seal records"));
  BOOST_TEST(p.flat_values().data<float>()[0] == 7.0f);
}

BOOST_AUTO_TEST_CASE(the_seal_is_the_files_size_and_xxh3_in_a_user_block) {
  TempDir tmp;
  const std::string path = save_reference(tmp.file("ckpt.h5"));
  std::ifstream in(path, std::ios::binary);
  std::string head(scaletrain::io::kSealBytes, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  const scaletrain::io::FileDigest rest = scaletrain::io::digest_file(path, scaletrain::io::kSealBytes);
  const std::string expected = "scaletrain-seal 1\nbytes " + std::to_string(fs::file_size(path)) + "\nxxh3 " +
                               scaletrain::io::xxh3_hex(rest.xxh3) + "\n";
  BOOST_TEST(head.substr(0, expected.size()) == expected);
  BOOST_TEST(head.find_first_not_of('\0', expected.size()) == std::string::npos);
  BOOST_TEST(rest.bytes == static_cast<int64_t>(fs::file_size(path)) - scaletrain::io::kSealBytes);
}

BOOST_AUTO_TEST_CASE(a_cut_short_checkpoint_is_refused_before_hdf5_opens_it) {
  TempDir tmp;
  const std::string path = save_reference(tmp.file("ckpt.h5"));
  const auto size = fs::file_size(path);
  fs::resize_file(path, size - 4096);
  BOOST_CHECK_EXCEPTION(read_checkpoint_meta(path), Error,
                        message_has("checkpoint " + path + " is damaged: " + std::to_string(size - 4096) +
                                        " bytes on disk, " + std::to_string(size) + " when it was written",
                                    "cut short"));
}

BOOST_AUTO_TEST_CASE(an_unsealed_checkpoint_is_still_checked_by_its_crc) {
  // h5unjam (hdf5-tools) removes the seal, as after an edit with h5py (docs/checkpoint-format.md).
  TempDir tmp;
  const std::string sealed = save_reference(tmp.file("sealed.h5"));
  const std::string path = tmp.file("unsealed.h5");
  BOOST_REQUIRE(std::system(("h5unjam -i " + sealed + " -o " + path + " > /dev/null").c_str()) == 0);
  BOOST_TEST(read_checkpoint(path).meta.epoch == read_checkpoint(sealed).meta.epoch);
  flip_byte(path, "/optimizer/layer1.0.conv1.weight");
  BOOST_CHECK_EXCEPTION(read_checkpoint(path), Error, message_has("checkpoint " + path + " is damaged", "CRC-32"));
}

BOOST_AUTO_TEST_CASE(files_from_other_tools_without_checksum_load) {
  // What docs/checkpoint-format.md shows for PyTorch weights: format 1, /model only, and
  // PyTorch's num_batches_tracked counters, which are ignored.
  TempDir tmp;
  const std::string path = tmp.file("from_torch.h5");
  ParameterSet src = make_params();
  fill_pattern(src.flat_values(), 0.5f, 0.25f);
  {
    scaletrain::io::H5File f(path, scaletrain::io::H5File::Mode::create_truncate);
    f.set_attribute("scaletrain_checkpoint_format", int64_t{1});
    f.set_attribute("model", "resnet20");
    f.set_attribute("epoch", int64_t{0});
    f.set_attribute("step", int64_t{0});
    for (const auto& info : src.state_infos()) f.write("/model/" + info.name, *src.find(info.name));
    f.write("/model/bn1.num_batches_tracked", Tensor::zeros({}, scaletrain::DType::i64));
  }
  ParameterSet dst = make_params();
  const CheckpointMeta meta = load_checkpoint(path, "resnet20", dst, nullptr);
  BOOST_TEST(meta.format == 1);
  BOOST_TEST(same_bits(dst.flat_values(), src.flat_values()));

  // A tensor this model does not have is named.
  {
    scaletrain::io::H5File f(path, scaletrain::io::H5File::Mode::read_write);
    f.write("/model/layer9.weight", Tensor::zeros({2}));
  }
  BOOST_CHECK_EXCEPTION(load_checkpoint(path, "resnet20", dst, nullptr), Error,
                        message_has("unexpected tensor /model/layer9.weight"));
  BOOST_CHECK_EXCEPTION(load_checkpoint(path, "resnet20", dst, nullptr), Error, [](const Error& e) {
    return std::string(e.what()).find("num_batches_tracked") == std::string::npos;
  });
}

BOOST_AUTO_TEST_CASE(missing_file_and_not_a_checkpoint) {
  TempDir tmp;
  const std::string missing = tmp.file("nope.h5");
  BOOST_CHECK_EXCEPTION(read_checkpoint_meta(missing), Error, message_has("checkpoint " + missing, "not found"));
  ParameterSet p = make_params();
  BOOST_CHECK_EXCEPTION(load_checkpoint(missing, "resnet20", p, nullptr), Error, message_has(missing, "not found"));

  const std::string text = tmp.file("text.h5");
  std::ofstream(text) << "this is not HDF5";
  BOOST_CHECK_EXCEPTION(load_checkpoint(text, "resnet20", p, nullptr), Error, message_has(text, "not an HDF5 file"));

  const std::string other = tmp.file("dataset.h5");
  {
    scaletrain::io::H5File f(other, scaletrain::io::H5File::Mode::create_truncate);
    f.set_attribute("scaletrain_format", int64_t{1});
  }
  BOOST_CHECK_EXCEPTION(load_checkpoint(other, "resnet20", p, nullptr), Error,
                        message_has("checkpoint " + other, "not a scaletrain checkpoint"));
}

BOOST_AUTO_TEST_CASE(wrong_model) {
  TempDir tmp;
  const std::string path = save_reference(tmp.file("ref.h5"));
  ParameterSet p = make_params();
  BOOST_CHECK_EXCEPTION(load_checkpoint(path, "resnet50", p, nullptr), Error,
                        message_has("checkpoint " + path + " is for model resnet20, not resnet50"));
}

BOOST_AUTO_TEST_CASE(wrong_shape_leaves_the_model_unchanged) {
  TempDir tmp;
  const std::string path = save_reference(tmp.file("ref.h5"));
  ParameterSet p = make_params(12);
  p.flat_values().fill(7.0f);
  BOOST_CHECK_EXCEPTION(
      load_checkpoint(path, "resnet20", p, nullptr), Error,
      message_has("/model/fc.weight has shape [10, 4] in the checkpoint, the model expects [12, 4]",
                  "/model/fc.bias has shape [10] in the checkpoint, the model expects [12]", "checkpoint " + path));
  BOOST_TEST(p.flat_values().data<float>()[0] == 7.0f);  // nothing loaded
  // The optimizer group is checked as well.
  scaletrain::optim::Sgd sgd(p, {});
  BOOST_CHECK_EXCEPTION(load_checkpoint(path, "resnet20", p, &sgd), Error,
                        message_has("/optimizer/fc.weight has shape [10, 4]"));
  ParameterSet bigger = make_params(10, true);
  BOOST_CHECK_EXCEPTION(load_checkpoint(path, "resnet20", bigger, nullptr), Error,
                        message_has("checkpoint " + path, "missing tensor /model/fc2.bias [3]"));
}

BOOST_AUTO_TEST_CASE(failed_save_names_the_path_and_leaves_no_file) {
  scaletrain::io::h5_silence_errors();  // the failure below is expected: keep HDF5's trace out of the log
  TempDir tmp;
  ParameterSet p = make_params();
  const std::string path = tmp.file("missing_dir/ckpt.h5");
  BOOST_CHECK_EXCEPTION(
      save_checkpoint(path, meta_of(0, 0), p), Error,
      message_has("cannot write checkpoint " + path, "the previous checkpoint, if any, is unchanged"));
  BOOST_TEST(!fs::exists(path));
  BOOST_TEST(!fs::exists(path + ".tmp"));
}

BOOST_AUTO_TEST_CASE(run_directory_names_latest_and_retention) {
  TempDir tmp;
  const std::string run = tmp.file("run");
  BOOST_TEST(list_checkpoints(run).empty());  // no directory yet
  BOOST_TEST(checkpoint_file(run, 42) == run + "/checkpoints/step-000000042.h5");
  fs::create_directories(checkpoints_dir(run));
  for (int64_t step : {5, 10, 15, 20}) save_reference(checkpoint_file(run, step), step);
  std::ofstream(checkpoints_dir(run) + "/step-000000025.h5.tmp") << "an interrupted write";
  std::ofstream(checkpoints_dir(run) + "/notes.txt") << "a user's own file";
  // By step, highest first; `latest` does not change the order.
  std::vector<std::string> order = list_checkpoints(run);
  BOOST_TEST(order.size() == 4u);
  BOOST_TEST(order.front() == checkpoint_file(run, 20));
  BOOST_TEST(order.back() == checkpoint_file(run, 5));
  publish_latest(run, checkpoint_file(run, 10));
  BOOST_TEST(list_checkpoints(run) == order);
  std::ifstream pointer(checkpoints_dir(run) + "/latest");
  std::string line;
  std::getline(pointer, line);
  BOOST_TEST(line == "step-000000010.h5");
  // The run directory and its checkpoints folder both name the run.
  BOOST_TEST(read_newest_checkpoint(run).meta.step == 20);
  BOOST_TEST(read_newest_checkpoint(checkpoints_dir(run)).meta.step == 20);

  // Retention keeps the newest two and the one `latest` names.
  const std::vector<std::string> removed = prune_checkpoints(run, 2);
  BOOST_TEST(removed.size() == 2u);  // step 5 and the .tmp
  BOOST_TEST(fs::exists(checkpoint_file(run, 20)));
  BOOST_TEST(fs::exists(checkpoint_file(run, 15)));
  BOOST_TEST(fs::exists(checkpoint_file(run, 10)));
  BOOST_TEST(!fs::exists(checkpoint_file(run, 5)));
  BOOST_TEST(!fs::exists(checkpoints_dir(run) + "/step-000000025.h5.tmp"));
  BOOST_TEST(fs::exists(checkpoints_dir(run) + "/notes.txt"));
  publish_latest(run, checkpoint_file(run, 20));
  BOOST_TEST(prune_checkpoints(run, 1).size() == 2u);
  BOOST_TEST(list_checkpoints(run) == std::vector<std::string>{checkpoint_file(run, 20)});

  // A run resumed from step 12 (say, 20 was damaged) sets the newer ones aside.
  save_reference(checkpoint_file(run, 12), 12);
  const std::vector<std::string> moved = set_aside_newer_checkpoints(run, 12);
  BOOST_TEST(moved == std::vector<std::string>{checkpoint_file(run, 20) + ".damaged"});
  BOOST_TEST(list_checkpoints(run) == std::vector<std::string>{checkpoint_file(run, 12)});
}

BOOST_AUTO_TEST_CASE(newest_valid_checkpoint_skips_damaged_ones) {
  TempDir tmp;
  const std::string run = tmp.file("run");
  fs::create_directories(checkpoints_dir(run));
  BOOST_CHECK_EXCEPTION(read_newest_checkpoint(run), Error, message_has("no checkpoint in " + run));
  for (int64_t step : {10, 20, 30}) save_reference(checkpoint_file(run, step), step);
  publish_latest(run, checkpoint_file(run, 30));
  // The newest is cut short (a copy interrupted by a quota), the next has a flipped bit.
  fs::resize_file(checkpoint_file(run, 30), fs::file_size(checkpoint_file(run, 30)) / 2);
  flip_byte(checkpoint_file(run, 20), "/model/fc.weight");
  BOOST_TEST(read_newest_checkpoint(run).meta.step == 10);
  flip_byte(checkpoint_file(run, 10), "/model/conv1.weight");
  BOOST_CHECK_EXCEPTION(read_newest_checkpoint(run), Error,
                        message_has("no valid checkpoint in " + run + ": all 3 are damaged",
                                    "step-000000020.h5 is "
                                    "damaged"));
}

BOOST_AUTO_TEST_SUITE_END()
