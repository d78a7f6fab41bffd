// The op registry (ops/registry.hpp): every op of src/ops is registered once with a CPU kernel;
// supports() and the refusal name the ops a device lacks; and what each model and optimizer says
// it runs (Network::ops, Optimizer::ops) is exactly what its forward, backward and step dispatch,
// recorded at the dispatch point (OpRecorder) on the CPU.
#include <algorithm>
#include <boost/test/unit_test.hpp>

#include "ops/op.hpp"
#include "scaletrain/config.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/rng.hpp"
#include "scaletrain/models/model.hpp"
#include "scaletrain/models/neumf.hpp"
#include "scaletrain/ops/registry.hpp"
#include "scaletrain/optim/adam.hpp"
#include "scaletrain/optim/lars.hpp"
#include "scaletrain/optim/sgd.hpp"
#include "scaletrain/train/config.hpp"

namespace st = scaletrain;
using st::ops::OpNames;

namespace {

// An op of this test alone, with a CPU kernel and none on CUDA: what a refusal looks like.
using TestOnlyFn = void(st::Context& ctx, int& calls);
void test_only_cpu_kernel(st::Context&, int& calls) { ++calls; }
const st::ops::Op<TestOnlyFn> test_only_op{"test_only_cpu_op", {test_only_cpu_kernel}, {}};
// An op whose CUDA kernel (a stand-in: the registry only reads the declaration) runs in fp32 alone,
// and one whose CUDA kernel declares its 16-bit versions.
const st::ops::Op<TestOnlyFn> test_fp32_cuda_op{
    "test_only_fp32_cuda_op", {test_only_cpu_kernel}, {test_only_cpu_kernel, true, st::ops::kFp32Only}};
const st::ops::Op<TestOnlyFn> test_amp_cuda_op{
    "test_only_amp_cuda_op", {test_only_cpu_kernel}, {test_only_cpu_kernel, true, st::ops::kEveryPrecision}};

std::string names(const OpNames& ops) {
  std::string out;
  for (const std::string& op : ops) out += (out.empty() ? "" : " ") + op;
  return out;
}

// Random inputs of a shape, U(-1, 1).
st::Tensor random_tensor(const st::Shape& shape, uint64_t seed) {
  st::Tensor t = st::Tensor::empty(shape);
  st::Rng rng(seed);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(rng.uniform() * 2.0 - 1.0);
  return t;
}

// The ops an image classifier dispatches: a training forward and backward, then an evaluation forward.
OpNames recorded_image_model_ops(st::models::Model& m, const st::Shape& input, bool training) {
  st::Context ctx;
  m.initialize(1);
  const st::ops::OpRecorder recorder;
  const st::Tensor x = random_tensor(input, 2);
  // A training step as it runs by default and with --fuse bn-add-relu,bn-relu,conv-bias-relu
  // (residual blocks, batch norms with a ReLU and convolutions with a bias and ReLU list the fused
  // ops among their training ops).
  for (const bool fuse : {false, true}) {
    if (!training) break;
    ctx.set_fuse_bn_add_relu(fuse);
    ctx.set_fuse_conv_bias_relu(fuse);
    ctx.set_fuse_bn_relu(fuse);
    const st::Tensor logits = m.forward(ctx, x, true);
    std::vector<st::Tensor> aux_dlogits;
    for (const st::Tensor& a : m.aux_logits()) aux_dlogits.push_back(random_tensor(a.shape(), 4));
    m.backward(ctx, random_tensor(logits.shape(), 3), aux_dlogits);
  }
  m.forward(ctx, x, false);
  return recorder.ops();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(op_registry)

BOOST_AUTO_TEST_CASE(every_op_is_registered_once_with_a_cpu_kernel) {
  const std::vector<st::ops::OpInfo> ops = st::ops::registered_ops();
  BOOST_TEST(ops.size() >= 31u);  // the ops of src/ops when the registry came
  for (const st::ops::OpInfo& op : ops) {
    BOOST_TEST(op.kernel[st::ops::device_index(st::Device::cpu)], op.name);
    BOOST_TEST(op.deterministic[st::ops::device_index(st::Device::cpu)], op.name);  // the CPU is the reference
    BOOST_TEST(st::ops::supports(op.name, st::Device::cpu));
    // A kernel in this build is one the source declares; CUDA's are built where the backend is
    // (this test's own ops have host functions as their stand-in CUDA kernels).
    const int cuda = st::ops::device_index(st::Device::cuda);
    if (op.name.rfind("test_", 0) != 0)
      BOOST_TEST((op.kernel[cuda] == (op.declared[cuda] && SCALETRAIN_HAVE_CUDA)), op.name);
  }
  BOOST_TEST(std::is_sorted(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.name < b.name; }));
  for (const char* op : {"conv2d_forward", "embedding_backward", "adam_update", "lars_update", "accumulate_gradient"})
    BOOST_TEST(st::ops::op_info(op).name == op);
}

BOOST_AUTO_TEST_CASE(an_unknown_op_is_an_error_naming_it) {
  try {
    st::ops::supports("conv3d_forward", st::Device::cpu);
    BOOST_FAIL("an unknown op was answered");
  } catch (const st::Error& e) {
    BOOST_TEST(std::string(e.what()).find("no op named conv3d_forward") != std::string::npos, e.what());
  }
}

BOOST_AUTO_TEST_CASE(the_refusal_names_the_ops_a_device_lacks_and_what_brings_them) {
  // The CPU has every op: nothing to refuse.
  BOOST_TEST(st::train::kernels_missing(st::Device::cpu, {{"--model ncf", st::models::model_ops("ncf", true)}}) == "");
  // On CUDA, exactly the ops the registry says have no kernel in this build, grouped.
  const OpNames ncf = st::models::model_ops("ncf", true);
  std::vector<std::string> missing;
  for (const std::string& op : ncf)
    if (!st::ops::supports(op, st::Device::cuda)) missing.push_back(op);
  const std::string refusal =
      st::train::kernels_missing(st::Device::cuda, {{"--model ncf", ncf}, {"--optimizer sgd", {"sgd_update"}}});
  if (missing.empty()) {
    BOOST_TEST(refusal == "");
  } else {
    BOOST_TEST(refusal.rfind("no CUDA kernel for " + st::ops::op_list(missing) + " (--model ncf)", 0) == 0u, refusal);
  }
  BOOST_TEST(st::ops::op_list({"a", "b", "c"}) == "a, b and c");
  BOOST_TEST(st::ops::op_list({"a"}) == "a");
}

BOOST_AUTO_TEST_CASE(an_op_without_a_kernel_on_a_device_is_refused_by_name) {
  BOOST_TEST(st::ops::supports("test_only_cpu_op", st::Device::cpu));
  BOOST_TEST(!st::ops::supports("test_only_cpu_op", st::Device::cuda));
  BOOST_TEST(!st::ops::op_info("test_only_cpu_op").declared[st::ops::device_index(st::Device::cuda)]);
  const std::string refusal = st::train::kernels_missing(
      st::Device::cuda, {{"--model x", {"test_only_cpu_op"}}, {"--optimizer y", {"test_only_cpu_op", "relu_forward"}}});
  const std::string expected =
      SCALETRAIN_HAVE_CUDA ? "no CUDA kernel for test_only_cpu_op (--model x); test_only_cpu_op (--optimizer y)"
                           : "no CUDA kernel for test_only_cpu_op (--model x); relu_forward and test_only_cpu_op "
                             "(--optimizer y)";
  BOOST_TEST(refusal == expected);
  // The dispatch point: the CPU kernel runs; another device is refused, naming the op.
  st::Context ctx;
  int calls = 0;
  test_only_op(ctx, calls);
  BOOST_TEST(calls == 1);
}

BOOST_AUTO_TEST_CASE(the_cpu_runs_every_op_in_every_precision) {
  for (const st::ops::OpInfo& op : st::ops::registered_ops())
    for (st::Precision p : {st::Precision::fp32, st::Precision::amp_fp16, st::Precision::amp_bf16})
      BOOST_TEST(st::ops::supports(op.name, st::Device::cpu, p), op.name << " in " << st::precision_name(p));
  const st::Json cpu = st::ops::registry_json().at("conv2d_forward").at("devices").at("cpu").at("precisions");
  BOOST_TEST(cpu.dump() == R"(["fp32", "amp-fp16", "amp-bf16"])");
  BOOST_TEST(st::ops::precision_list(st::ops::kEveryPrecision) == "fp32, amp-fp16 and amp-bf16");
  // The dispatch runs the CPU kernel in a mixed precision (and rounds its outputs).
  st::Context ctx;
  ctx.set_precision(st::Precision::amp_bf16);
  int calls = 0;
  test_only_op(ctx, calls);
  BOOST_TEST(calls == 1);
}

BOOST_AUTO_TEST_CASE(a_kernel_declares_the_precisions_it_runs_in_and_the_refusal_names_them) {
  const int cuda = st::ops::device_index(st::Device::cuda);
  BOOST_TEST(st::ops::op_info("test_only_fp32_cuda_op").precisions[cuda] == st::ops::kFp32Only);
  BOOST_TEST(st::ops::op_info("test_only_amp_cuda_op").precisions[cuda] == st::ops::kEveryPrecision);
  BOOST_TEST(st::ops::op_info("test_only_cpu_op").precisions[cuda] == 0u);  // none declared
  BOOST_TEST(st::ops::supports("test_only_fp32_cuda_op", st::Device::cuda, st::Precision::fp32));
  BOOST_TEST(!st::ops::supports("test_only_fp32_cuda_op", st::Device::cuda, st::Precision::amp_fp16));
  BOOST_TEST(st::ops::supports("test_only_amp_cuda_op", st::Device::cuda, st::Precision::amp_bf16));
  const std::vector<std::pair<std::string, OpNames>> needs = {
      {"--model x", {"test_only_fp32_cuda_op", "test_only_amp_cuda_op", "test_only_cpu_op"}},
      {"--optimizer y", {"test_only_fp32_cuda_op"}}};
  // In fp32 only the op without a CUDA kernel; in amp-fp16 also the fp32-only one, named apart.
  BOOST_TEST(st::train::kernels_missing(st::Device::cuda, needs) == "no CUDA kernel for test_only_cpu_op (--model x)");
  BOOST_TEST(st::train::kernels_missing(st::Device::cuda, needs, st::Precision::amp_fp16) ==
             "no CUDA kernel for test_only_cpu_op (--model x); no CUDA kernel in amp-fp16 for test_only_fp32_cuda_op "
             "(--model x); test_only_fp32_cuda_op (--optimizer y)");
  BOOST_TEST(st::train::kernels_missing(st::Device::cpu, needs, st::Precision::amp_bf16) == "");
  // Every op of the source runs in every precision on every device it has a kernel for (the dispatch
  // rounds the 16-bit outputs on either device), this test's fp32-only op apart: a model that runs
  // in fp32 on the GPU runs in a mixed precision there too.
  for (const st::ops::OpInfo& op : st::ops::registered_ops())
    for (int d = 0; d < st::ops::kNumDevices; ++d)
      if (op.declared[d] && op.name != "test_only_fp32_cuda_op")
        BOOST_TEST(op.precisions[d] == st::ops::kEveryPrecision, op.name << " on " << d);
  const std::vector<std::pair<std::string, OpNames>> resnet20 = {
      {"--model resnet20", st::models::model_ops("resnet20", true)}};
  BOOST_TEST(st::train::kernels_missing(st::Device::cuda, resnet20, st::Precision::amp_bf16) ==
             st::train::kernels_missing(st::Device::cuda, resnet20, st::Precision::fp32));
}

BOOST_AUTO_TEST_CASE(resnet20_says_what_it_runs) {
  auto m = st::models::make_model("resnet20", 10, 3);
  BOOST_TEST(names(m->ops(true)) == names(recorded_image_model_ops(*m, {2, 8, 8, 3}, true)));
  BOOST_TEST(names(m->ops(false)) == names(recorded_image_model_ops(*m, {2, 8, 8, 3}, false)));
  BOOST_TEST(names(st::models::model_ops("resnet20", true)) == names(m->ops(true)));
}

BOOST_AUTO_TEST_CASE(resnet50_says_what_it_runs) {
  auto m = st::models::make_model("resnet50", 5, 3);
  BOOST_TEST(names(m->ops(true)) == names(recorded_image_model_ops(*m, {2, 32, 32, 3}, true)));
  BOOST_TEST(names(m->ops(false)) == names(recorded_image_model_ops(*m, {2, 32, 32, 3}, false)));
}

// The CNNs of the LRZ study at small inputs (alexnet-caffe at its fixed size; googlenet-caffe, at
// 224 only, has no op the others lack but biased 5x5 convolutions), with their
// auxiliary heads on (their default weights) and off: dropout, LRN, the flatten, the
// concatenations and the heads' ops are listed exactly when they run.
BOOST_AUTO_TEST_CASE(imagenet_cnns_say_what_they_run) {
  struct Case {
    const char* model;
    st::Shape input;
    double aux_weight;
  };
  for (const Case& c : {Case{"alexnet", {1, 64, 64, 3}, 0.0}, Case{"googlenet", {2, 32, 32, 3}, 0.3},
                        Case{"googlenet", {2, 32, 32, 3}, 0.0}, Case{"inception_v3", {2, 75, 75, 3}, 0.0},
                        Case{"alexnet-caffe", {1, 227, 227, 3}, 0.0}}) {
    BOOST_TEST_CONTEXT(c.model << " with --aux-loss-weight " << c.aux_weight) {
      auto m = st::models::make_model(c.model, 5, 3);
      m->set_aux_loss_weight(c.aux_weight);
      BOOST_TEST(names(m->ops(true)) == names(recorded_image_model_ops(*m, c.input, true)));
      BOOST_TEST(names(m->ops(false)) == names(recorded_image_model_ops(*m, c.input, false)));
    }
  }
}

BOOST_AUTO_TEST_CASE(neumf_says_what_it_runs) {
  st::models::NeuMF m(7, 9, 4, {8, 4});
  m.initialize(1);
  st::Context ctx;
  st::Tensor users = st::Tensor::empty({5}, st::DType::i32), items = st::Tensor::empty({5}, st::DType::i32);
  for (int i = 0; i < 5; ++i) users.data<int32_t>()[i] = i, items.data<int32_t>()[i] = 8 - i;
  OpNames evaluation, training;
  {
    const st::ops::OpRecorder recorder;
    m.forward(ctx, users, items);
    evaluation = recorder.ops();
  }
  {
    const st::ops::OpRecorder recorder;
    const st::Tensor logits = m.forward(ctx, users, items);
    m.backward(ctx, random_tensor(logits.shape(), 4));
    training = recorder.ops();
  }
  BOOST_TEST(names(m.ops(false)) == names(evaluation));
  BOOST_TEST(names(m.ops(true)) == names(training));
}

BOOST_AUTO_TEST_CASE(optimizers_say_what_their_step_runs) {
  st::nn::ParameterSet params;
  params.add_parameter("conv.weight", {4, 3, 3, 3});
  params.add_parameter("bn.bias", {4});
  params.finalize();
  for (int64_t i = 0; i < params.flat_values().numel(); ++i) {
    params.flat_values().data<float>()[i] = 0.01f * static_cast<float>(i % 17);
    params.flat_grads().data<float>()[i] = 0.02f * static_cast<float>(i % 5) - 0.04f;
  }
  st::Context ctx;
  std::vector<std::unique_ptr<st::optim::Optimizer>> optimizers;
  optimizers.push_back(std::make_unique<st::optim::Sgd>(params, st::optim::SgdOptions{}));
  optimizers.push_back(std::make_unique<st::optim::Adam>(params, st::optim::AdamOptions{}));
  optimizers.push_back(std::make_unique<st::optim::Lars>(params, st::optim::LarsOptions{}));
  for (auto& o : optimizers) {
    const st::ops::OpRecorder recorder;
    o->step(ctx, 0.1);
    BOOST_TEST(names(o->ops()) == names(recorder.ops()), o->name());
  }
}

BOOST_AUTO_TEST_CASE(the_table_has_a_row_per_op) {
  const std::string table = st::ops::registry_markdown();
  BOOST_TEST(static_cast<std::size_t>(std::count(table.begin(), table.end(), '\n')) ==
             st::ops::registered_ops().size() + 2);
  BOOST_TEST(table.find("| `conv2d_forward` | f32 | yes | yes |") != std::string::npos, table);
  BOOST_TEST(table.find("| `conv2d_backward_filter` | f32 | yes | yes (not deterministic) |") != std::string::npos,
             table);
  const st::Json j = st::ops::registry_json();
  BOOST_TEST(j.at("conv2d_forward").at("devices").contains("cuda"));
  BOOST_TEST(j.at("conv2d_forward").at("devices").at("cuda").at("deterministic").as_bool());
  BOOST_TEST(!j.at("conv2d_backward_data").at("devices").at("cuda").at("deterministic").as_bool());
  BOOST_TEST(j.at("conv2d_forward").at("devices").at("cuda").at("built").as_bool() == bool(SCALETRAIN_HAVE_CUDA));
}

BOOST_AUTO_TEST_SUITE_END()
