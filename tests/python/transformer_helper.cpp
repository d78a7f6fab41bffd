// Helper of tests/python/test_torch_transformer.py: builds the MLPerf Transformer
// (models/transformer.hpp) at the sizes IN.h5 gives, initialises it from a seed, runs one forward
// with dropout off and the backward of a given logits gradient, and writes the parameters, the
// logits and every parameter gradient, for comparison with torch.nn.Transformer(norm_first=True)
// loaded with the same weights; then one Adam step (the reference's betas and epsilon, optim/adam.hpp)
// from those gradients and a second from dlogits2's at the moved weights, and writes the updated
// parameters. One process, the CPU backend.
//
// usage: scaletrain_torch_transformer_helper IN.h5 OUT.h5
// IN.h5:  attributes width, heads, inner, layers, vocab, seed, adam_lr, adam_beta1, adam_beta2,
//         adam_epsilon; source (N, Ls) i32, source_lengths (N) i32, target_input (N, Lt) i32,
//         dlogits and dlogits2 (N * Lt, V)
// OUT.h5: params/<name>, grads/<name> and stepped/<name> (after the two Adam steps) for every parameter
//         (state_dict names), logits
#include <cstdio>
#include <exception>

#include "scaletrain/io/hdf5.hpp"
#include "scaletrain/models/transformer.hpp"
#include "scaletrain/optim/adam.hpp"

namespace st = scaletrain;
using st::io::H5File;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s IN.h5 OUT.h5\n", argv[0]);
    return 2;
  }
  try {
    const H5File in(argv[1], H5File::Mode::read);
    st::models::TransformerConfig c{"transformer-test",
                                    static_cast<int>(in.get_int_attribute("width")),
                                    static_cast<int>(in.get_int_attribute("heads")),
                                    static_cast<int>(in.get_int_attribute("inner")),
                                    static_cast<int>(in.get_int_attribute("layers")),
                                    0.1};
    st::models::Transformer model(c, in.get_int_attribute("vocab"));
    model.initialize(static_cast<uint64_t>(in.get_int_attribute("seed")));
    st::Context ctx(st::Device::cpu, 2);
    const st::Tensor source = in.read("source", st::DType::i32);
    const st::Tensor lengths = in.read("source_lengths", st::DType::i32);
    const st::Tensor target = in.read("target_input", st::DType::i32);
    const st::Tensor dlogits = in.read("dlogits", st::DType::f32);
    const st::Tensor logits = model.forward(ctx, source, lengths, target, false);
    H5File out(argv[2], H5File::Mode::create_truncate);
    out.write("logits", logits);
    model.backward(ctx, dlogits);
    st::nn::ParameterSet& p = model.params();
    out.create_group("params");
    out.create_group("grads");
    for (int i = 0; i < p.num_parameters(); ++i) {
      out.write("params/" + p.parameter_info(i).name, p.value(i));
      out.write("grads/" + p.parameter_info(i).name, p.grad(i));
    }
    const st::optim::AdamOptions adam{in.get_double_attribute("adam_beta1"), in.get_double_attribute("adam_beta2"),
                                      in.get_double_attribute("adam_epsilon")};
    st::optim::Adam optimizer(p, adam);
    optimizer.step(ctx, in.get_double_attribute("adam_lr"));
    // A second step from the gradient of dlogits2 at the moved weights: the first step of Adam
    // does not depend on its betas (the corrected moments are g and g^2), the second does.
    model.forward(ctx, source, lengths, target, false);
    model.backward(ctx, in.read("dlogits2", st::DType::f32));
    optimizer.step(ctx, in.get_double_attribute("adam_lr"));
    out.create_group("stepped");
    for (int i = 0; i < p.num_parameters(); ++i) out.write("stepped/" + p.parameter_info(i).name, p.value(i));
    out.close();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "scaletrain_torch_transformer_helper: %s\n", e.what());
    return 1;
  }
  return 0;
}
