// Checkpoints: a save/load round trip of a small model with momentum (bit-exact), the atomic
// publish (no .tmp left), and the errors for a missing file, a non-checkpoint, another model,
// another shape, missing and unexpected tensors, each checked by its message.
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "scaletrain/checkpoint/checkpoint.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/io/hdf5.hpp"
#include "scaletrain/nn/parameters.hpp"
#include "scaletrain/optim/sgd.hpp"

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

// A saved resnet20 checkpoint of make_params() with momentum; returns its path.
std::string save_reference(const TempDir& tmp, const std::string& name = "ref.h5") {
  ParameterSet p = make_params();
  fill_pattern(p.flat_values(), 0.125f, -1.0f);
  fill_pattern(p.buffer(0), 0.5f, 0.0f);
  fill_pattern(p.buffer(1), 0.25f, 1.0f);
  scaletrain::optim::Sgd sgd(p, {});
  fill_pattern(sgd.momentum_buffer(), -0.0625f, 0.5f);
  const std::string path = tmp.file(name);
  save_checkpoint(path, CheckpointMeta{1, "resnet20", 3, 1234}, p, &sgd);
  return path;
}

auto message_has(const std::string& a, const std::string& b = "", const std::string& c = "") {
  return [=](const Error& e) {
    const std::string m = e.what();
    const bool ok = m.find(a) != std::string::npos && m.find(b) != std::string::npos && m.find(c) != std::string::npos;
    if (!ok) BOOST_TEST_MESSAGE("unexpected message: " << m);
    return ok;
  };
}

}  // namespace

BOOST_AUTO_TEST_SUITE(checkpoint)

BOOST_AUTO_TEST_CASE(round_trip_with_momentum) {
  TempDir tmp;
  ParameterSet src = make_params();
  fill_pattern(src.flat_values(), 0.125f, -1.0f);
  fill_pattern(src.buffer(0), 0.5f, 0.0f);
  fill_pattern(src.buffer(1), 0.25f, 1.0f);
  scaletrain::optim::Sgd src_sgd(src, {});
  fill_pattern(src_sgd.momentum_buffer(), -0.0625f, 0.5f);
  const std::string path = tmp.file("ckpt.h5");
  save_checkpoint(path, CheckpointMeta{1, "resnet20", 3, 1234}, src, &src_sgd);
  BOOST_TEST(fs::exists(path));
  BOOST_TEST(!fs::exists(path + ".tmp"));

  CheckpointMeta meta = read_checkpoint_meta(path);
  BOOST_TEST(meta.format == 1);
  BOOST_TEST(meta.model == "resnet20");
  BOOST_TEST(meta.epoch == 3);
  BOOST_TEST(meta.step == 1234);

  // The documented layout, read back with the plain HDF5 layer.
  {
    scaletrain::io::H5File f(path, scaletrain::io::H5File::Mode::read);
    BOOST_TEST(f.get_int_attribute("scaletrain_checkpoint_format") == 1);
    BOOST_TEST(f.dataset_shape("/model/layer1.0.conv1.weight") == (scaletrain::Shape{4, 4, 1, 1}));
    BOOST_TEST(f.dataset_type("/model/fc.weight") == "float32");
    BOOST_TEST(f.is_dataset("/model/bn1.running_var"));
    BOOST_TEST(f.is_dataset("/optimizer/fc.bias"));
    BOOST_TEST(!f.has("/optimizer/bn1.running_var"));  // buffers have no momentum
    BOOST_TEST(f.list("/model").size() == 8u);
  }

  ParameterSet dst = make_params();
  scaletrain::optim::Sgd dst_sgd(dst, {});
  meta = load_checkpoint(path, "resnet20", dst, &dst_sgd);
  BOOST_TEST(meta.step == 1234);
  BOOST_TEST(same_bits(dst.flat_values(), src.flat_values()));
  BOOST_TEST(same_bits(dst.buffer(0), src.buffer(0)));
  BOOST_TEST(same_bits(dst.buffer(1), src.buffer(1)));
  BOOST_TEST(same_bits(dst_sgd.momentum_buffer(), src_sgd.momentum_buffer()));

  // Saving again over the published file replaces it atomically.
  fill_pattern(src.flat_values(), 2.0f, 0.0f);
  save_checkpoint(path, CheckpointMeta{1, "resnet20", 4, 2000}, src, nullptr);
  BOOST_TEST(!fs::exists(path + ".tmp"));
  ParameterSet again = make_params();
  scaletrain::optim::Sgd again_sgd(again, {});
  fill_pattern(again_sgd.momentum_buffer(), 1.0f, 1.0f);
  const Tensor momentum_before = again_sgd.momentum_buffer().clone();
  meta = load_checkpoint(path, "", again, &again_sgd);  // no /optimizer now: momentum untouched
  BOOST_TEST(meta.epoch == 4);
  BOOST_TEST(same_bits(again.flat_values(), src.flat_values()));
  BOOST_TEST(same_bits(again_sgd.momentum_buffer(), momentum_before));
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
  const std::string path = save_reference(tmp);
  ParameterSet p = make_params();
  BOOST_CHECK_EXCEPTION(load_checkpoint(path, "resnet50", p, nullptr), Error,
                        message_has("checkpoint " + path + " is for model resnet20, not resnet50"));
}

BOOST_AUTO_TEST_CASE(wrong_shape_leaves_the_model_unchanged) {
  TempDir tmp;
  const std::string path = save_reference(tmp);
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
}

BOOST_AUTO_TEST_CASE(missing_and_unexpected_tensors) {
  TempDir tmp;
  const std::string path = save_reference(tmp);
  ParameterSet bigger = make_params(10, true);
  BOOST_CHECK_EXCEPTION(load_checkpoint(path, "resnet20", bigger, nullptr), Error,
                        message_has("checkpoint " + path, "missing tensor /model/fc2.bias [3]"));

  // A checkpoint with a tensor this model does not have.
  const std::string extra = save_reference(tmp, "extra.h5");
  {
    scaletrain::io::H5File f(extra, scaletrain::io::H5File::Mode::read_write);
    f.write("/model/layer9.weight", Tensor::zeros({2}));
    // PyTorch's counters are tolerated.
    f.write("/model/bn1.num_batches_tracked", Tensor::zeros({}, scaletrain::DType::i64));
  }
  ParameterSet p = make_params();
  BOOST_CHECK_EXCEPTION(load_checkpoint(extra, "resnet20", p, nullptr), Error,
                        message_has("unexpected tensor /model/layer9.weight"));
  BOOST_CHECK_EXCEPTION(load_checkpoint(extra, "resnet20", p, nullptr), Error, [](const Error& e) {
    return std::string(e.what()).find("num_batches_tracked") == std::string::npos;
  });
}

BOOST_AUTO_TEST_CASE(failed_save_leaves_no_file) {
  scaletrain::io::h5_silence_errors();  // the failure below is expected: keep HDF5's trace out of the log
  TempDir tmp;
  ParameterSet p = make_params();
  const std::string path = tmp.file("missing_dir/ckpt.h5");
  BOOST_CHECK_THROW(save_checkpoint(path, CheckpointMeta{1, "resnet20", 0, 0}, p, nullptr), Error);
  BOOST_TEST(!fs::exists(path));
  BOOST_TEST(!fs::exists(path + ".tmp"));
}

BOOST_AUTO_TEST_SUITE_END()
