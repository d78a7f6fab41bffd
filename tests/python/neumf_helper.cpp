// Helper of tests/python/test_torch_neumf.py: builds a NeuMF whose sizes are read off the
// weights that the script wrote (a PyTorch state_dict, one dataset per name), loads them by name,
// runs forward, the sigmoid-BCE loss and backward on the script's batch, and writes the results
// for comparison with PyTorch. No scaletrain command builds NeuMF yet, hence a program of its own
// (no MPI: one process, the CPU backend).
//
// usage: scaletrain_torch_neumf_helper IN.h5 OUT.h5
// IN.h5:  every state_dict entry under its name (mf_user_embed.weight, ..., final.bias);
//         users (N) i32, items (N) i32, targets (N) f32
// OUT.h5: logits (N), loss (1), and grad/<name> for every parameter
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "scaletrain/core/error.hpp"
#include "scaletrain/io/hdf5.hpp"
#include "scaletrain/models/neumf.hpp"
#include "scaletrain/ops/sigmoid_bce.hpp"

namespace st = scaletrain;
using st::io::H5File;

namespace {

// The MLP's sizes: layers[0] is twice the MLP embedding width, then each mlp.<k>'s out_features
// until the file has no mlp.<k>.
std::vector<int> mlp_layers(const H5File& in) {
  std::vector<int> layers{2 * static_cast<int>(in.dataset_shape("mlp_user_embed.weight").at(1))};
  for (int k = 0;; ++k) {
    const std::string name = "mlp." + std::to_string(k) + ".weight";
    if (!in.has(name)) break;
    layers.push_back(static_cast<int>(in.dataset_shape(name).at(0)));
  }
  return layers;
}

void run(const H5File& in, H5File& out) {
  const st::Tensor mf_user = in.read("mf_user_embed.weight", st::DType::f32);
  const st::Tensor mf_item = in.read("mf_item_embed.weight", st::DType::f32);
  st::models::NeuMF model(mf_user.dim(0), mf_item.dim(0), static_cast<int>(mf_user.dim(1)), mlp_layers(in));
  st::nn::ParameterSet& ps = model.params();
  for (int i = 0; i < ps.num_parameters(); ++i) {
    const st::nn::TensorInfo& info = ps.parameter_info(i);
    const st::Tensor t = in.read(info.name, st::DType::f32);
    ST_CHECK(t.shape() == info.shape, info.name << ": file has " << st::shape_string(t.shape()) << ", model has "
                                                << st::shape_string(info.shape));
    ps.value(i).copy_from(t);
  }
  const st::Tensor users = in.read("users", st::DType::i32), items = in.read("items", st::DType::i32);
  const st::Tensor targets = in.read("targets", st::DType::f32);
  st::Context ctx;
  const st::Tensor logits = model.forward(ctx, users, items);
  st::Tensor dlogits = st::Tensor::empty(logits.shape()), loss = st::Tensor::empty({1});
  loss.data<float>()[0] = static_cast<float>(st::ops::sigmoid_bce_with_logits(ctx, logits, targets, dlogits));
  model.backward(ctx, dlogits);
  out.write("logits", logits);
  out.write("loss", loss);
  for (int i = 0; i < ps.num_parameters(); ++i) out.write("grad/" + ps.parameter_info(i).name, ps.grad(i));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s IN.h5 OUT.h5\n", argv[0]);
    return 2;
  }
  try {
    const H5File in(argv[1], H5File::Mode::read);
    H5File out(argv[2], H5File::Mode::create_truncate);
    run(in, out);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", argv[0], e.what());
    return 1;
  }
  return 0;
}
