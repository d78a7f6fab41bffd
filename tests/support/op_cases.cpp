// The op test cases (op_cases.hpp) and the comparisons that judge them. Inputs are U(-1, 1)
// floats rounded to float32 (random_floats) unless a case says otherwise, so that the kernels and
// the float64 references see the same numbers. Shapes are the odd ones that break kernels (N = 1,
// channel counts that are not multiples of 8, stride 2, padding, 1x1 and 7x7 kernels) and small
// copies of ResNet-50's, sized to run in seconds on a CPU against naive float64 references.
//
// Tolerances are fp32-level on purpose: a GPU library that quietly computes in TF32 (cuDNN's and
// cuBLAS's default on Ampere and newer unless the backend asks for FMA math) fails them.
#include "support/op_cases.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "scaletrain/core/error.hpp"
#include "scaletrain/core/rng.hpp"
#include "scaletrain/ops/accumulate.hpp"
#include "scaletrain/ops/activation.hpp"
#include "scaletrain/ops/adam.hpp"
#include "scaletrain/ops/batch_norm.hpp"
#include "scaletrain/ops/batched_matmul.hpp"
#include "scaletrain/ops/cast.hpp"
#include "scaletrain/ops/concat.hpp"
#include "scaletrain/ops/conv2d.hpp"
#include "scaletrain/ops/dropout.hpp"
#include "scaletrain/ops/embedding.hpp"
#include "scaletrain/ops/flatten.hpp"
#include "scaletrain/ops/lars.hpp"
#include "scaletrain/ops/layer_norm.hpp"
#include "scaletrain/ops/linear.hpp"
#include "scaletrain/ops/loss.hpp"
#include "scaletrain/ops/loss_scale.hpp"
#include "scaletrain/ops/lrn.hpp"
#include "scaletrain/ops/multiply.hpp"
#include "scaletrain/ops/normalize.hpp"
#include "scaletrain/ops/pool.hpp"
#include "scaletrain/ops/sgd.hpp"
#include "scaletrain/ops/sigmoid_bce.hpp"
#include "scaletrain/ops/softmax.hpp"
#include "scaletrain/ops/swap_axes.hpp"
#include "scaletrain/ops/token_embedding.hpp"
#include "support/gradcheck.hpp"
#include "support/reference_activation.hpp"
#include "support/reference_batch_norm.hpp"
#include "support/reference_batched_matmul.hpp"
#include "support/reference_concat.hpp"
#include "support/reference_conv2d.hpp"
#include "support/reference_dropout.hpp"
#include "support/reference_embedding.hpp"
#include "support/reference_flatten.hpp"
#include "support/reference_layer_norm.hpp"
#include "support/reference_linear.hpp"
#include "support/reference_loss.hpp"
#include "support/reference_lrn.hpp"
#include "support/reference_multiply.hpp"
#include "support/reference_pool.hpp"
#include "support/reference_sigmoid_bce.hpp"
#include "support/reference_softmax.hpp"

namespace scaletrain::test {

namespace {

// count_correct on the case's context (the one op whose result is a host integer).
int64_t count_correct_on(Context& ctx, const Tensor& logits, const Tensor& labels) {
  return ops::count_correct(ctx, logits, labels);
}

// ---- tolerances ------------------------------------------------------------------------------

// A float32 sum of `terms` products of values in [-1, 1], however the kernel orders it: the
// result is about sqrt(terms / 9) in size and its rounding error grows with the number of terms,
// so the absolute tolerance does too, plus a few ulps of 1 for the short sums. The CPU kernels
// stay 3 to 10 times inside it; TF32 (inputs rounded to 10 mantissa bits) misses it by more than
// an order of magnitude.
Tolerance fp32_sum(int64_t terms) { return {5e-7 + 2e-7 * static_cast<double>(terms), 1e-5}; }

// Two backends each within `t` of the exact value are within twice `t` of each other.
Tolerance twice(const Tolerance& t) { return {2 * t.abs, 2 * t.rel}; }

// Results that are exact in float32 (a selected value, a sign test, a count) or rounded once
// from float64: no backend may differ.
constexpr Tolerance kExact{0.0, 0.0};
// One rounding of an exact float64 value to float32 (half an ulp).
constexpr Tolerance kOneRounding{1e-30, 6e-8};

// ---- inputs and outputs ----------------------------------------------------------------------

const Tensor& input(const NamedTensors& inputs, const std::string& name) {
  for (const auto& [n, t] : inputs)
    if (n == name) return t;
  ST_THROW("op case: no input named '" << name << "'");
}

std::vector<double> values(const NamedTensors& inputs, const std::string& name) {
  return tensor_values(input(inputs, name));
}

std::vector<int32_t> labels_of(const NamedTensors& inputs) {
  const Tensor& t = input(inputs, "labels");
  const int32_t* p = t.data<int32_t>();
  return std::vector<int32_t>(p, p + t.numel());
}

Tensor random_tensor(const Shape& shape, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  return to_tensor(random_floats(static_cast<std::size_t>(shape_numel(shape)), seed, lo, hi), shape);
}

// An input the op only reads, on the case's device (the input itself on the CPU).
Tensor on(Context& ctx, const Tensor& t) { return t.to(ctx.device()); }
// An input the op updates in place (running statistics, add_inplace's target): a copy, never the
// input itself, so that a case can run again on the same inputs.
Tensor copy_on(Context& ctx, const Tensor& t) { return t.clone().to(ctx.device()); }
// An output the op must overwrite: filled with NaN, so that an element left unwritten fails.
Tensor nan_on(Context& ctx, const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::f32, ctx.device());
  t.fill(std::numeric_limits<float>::quiet_NaN());
  return t;
}
Tensor to_cpu(const Tensor& t) { return t.to(Device::cpu); }

// A scalar result (a loss, a count) as a one-element CPU tensor.
Tensor scalar_f32(double v) { return to_tensor({v}, {1}); }
Tensor scalar_i64(int64_t v) {
  Tensor t = Tensor::empty({1}, DType::i64);
  t.data<int64_t>()[0] = v;
  return t;
}

std::string dims(const Shape& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? "x" : "") + std::to_string(s[i]);
  return out;
}

// ---- conv2d: forward, backward data, backward filter -----------------------------------------

struct ConvShape {
  int64_t n, h, w, c, o, k, stride, padding;
  int64_t kw = 0;  // the kernel's width where it is not square (0: k)
};

// "k3" or "k1x7", "s2" or "s1x2", "p1" or "p0x3" (per dimension) or "p1,0,2,1" (top, bottom,
// left, right), then " g2" and " bias" where they apply.
std::string conv_params_name(const RefConv2dDims& d, bool bias) {
  auto pair = [](int64_t a, int64_t b) { return std::to_string(a) + (a != b ? "x" + std::to_string(b) : ""); };
  std::string name = "k" + pair(d.kh, d.kw) + " s" + pair(d.stride_h, d.stride_w) + " p";
  if (d.pad_top == d.pad_bottom && d.pad_left == d.pad_right)
    name += pair(d.pad_top, d.pad_left);
  else
    name += std::to_string(d.pad_top) + "," + std::to_string(d.pad_bottom) + "," + std::to_string(d.pad_left) + "," +
            std::to_string(d.pad_right);
  if (d.groups > 1) name += " g" + std::to_string(d.groups);
  if (bias) name += " bias";
  return name;
}

// The op's parameters for the reference's dimensions.
ops::Conv2dParams conv_params_of(const RefConv2dDims& d) {
  return ops::Conv2dParams::per_side(static_cast<int>(d.stride_h), static_cast<int>(d.stride_w),
                                     static_cast<int>(d.pad_top), static_cast<int>(d.pad_bottom),
                                     static_cast<int>(d.pad_left), static_cast<int>(d.pad_right),
                                     static_cast<int>(d.groups));
}

// cpu_only: why the case cannot run on CUDA (empty: it runs everywhere).
OpCase conv2d_case(const RefConv2dDims& d, bool bias, uint64_t seed, const std::string& cpu_only = "") {
  const Shape xs{d.n, d.h, d.w, d.c}, ws{d.o, d.group_channels(), d.kh, d.kw}, ys{d.n, d.oh(), d.ow(), d.o}, bs{d.o};
  const ops::Conv2dParams p = conv_params_of(d);
  OpCase c;
  c.name = "conv2d " + conv_params_name(d, bias) + " N" + std::to_string(d.n) + " " + std::to_string(d.h) + "x" +
           std::to_string(d.w) + " C" + std::to_string(d.c) + "->O" + std::to_string(d.o);
  c.ops = {"conv2d_forward", "conv2d_backward_data", "conv2d_backward_filter"};
  c.cpu_only = cpu_only;
  c.make_inputs = [=] {
    NamedTensors in{
        {"x", random_tensor(xs, seed)}, {"w", random_tensor(ws, seed + 1)}, {"dy", random_tensor(ys, seed + 2)}};
    if (bias) in.emplace_back("b", random_tensor(bs, seed + 3));
    return in;
  };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    const Tensor x = on(ctx, input(in, "x")), w = on(ctx, input(in, "w")), dy = on(ctx, input(in, "dy"));
    const Tensor b = bias ? on(ctx, input(in, "b")) : Tensor();
    Tensor y = nan_on(ctx, ys), dx = nan_on(ctx, xs), dw = nan_on(ctx, ws);
    Tensor db = bias ? nan_on(ctx, bs) : Tensor();
    ops::conv2d_forward(ctx, p, x, w, b, y);
    ops::conv2d_backward_data(ctx, p, dy, w, dx);
    ops::conv2d_backward_filter(ctx, p, x, dy, dw, db);
    ctx.synchronize();
    NamedTensors out{{"y", to_cpu(y)}, {"dx", to_cpu(dx)}, {"dw", to_cpu(dw)}};
    if (bias) out.emplace_back("db", to_cpu(db));
    return out;
  };
  c.reference = [=](const NamedTensors& in) {
    const auto x = values(in, "x"), w = values(in, "w"), dy = values(in, "dy");
    NamedValues out{{"y", reference_conv2d_forward(d, x, w, bias ? values(in, "b") : std::vector<double>{})},
                    {"dx", reference_conv2d_backward_data(d, dy, w)},
                    {"dw", reference_conv2d_backward_filter(d, x, dy)}};
    if (bias) out.emplace_back("db", reference_conv2d_backward_bias(d, dy));
    return out;
  };
  // Terms per output element: y sums C/G*KH*KW (plus the bias), dx at most O/G*KH*KW, dw and db
  // N*OH*OW.
  const Tolerance ty = fp32_sum(d.group_channels() * d.kh * d.kw + (bias ? 1 : 0)),
                  tdx = fp32_sum(d.o / d.groups * d.kh * d.kw), tdw = fp32_sum(d.n * d.oh() * d.ow());
  c.outputs = {{"y", ty, twice(ty)}, {"dx", tdx, twice(tdx)}, {"dw", tdw, twice(tdw)}};
  c.gradients = {{"x", "dx", "y", "dy"}, {"w", "dw", "y", "dy"}};
  if (bias) {
    c.outputs.push_back({"db", tdw, twice(tdw)});
    c.gradients.push_back({"b", "db", "y", "dy"});
  }
  return c;
}

// A residual block's input gradient: dx (the shortcut's gradient, given) += the convolution's input
// gradient, against the reference's sum; also the two ops it replaces (conv2d_backward_data into
// a fresh tensor, then add_inplace), which must give the same sum within the same tolerance.
OpCase conv2d_backward_data_add_case(const RefConv2dDims& d, uint64_t seed) {
  const Shape xs{d.n, d.h, d.w, d.c}, ws{d.o, d.group_channels(), d.kh, d.kw}, ys{d.n, d.oh(), d.ow(), d.o};
  const ops::Conv2dParams p = conv_params_of(d);
  OpCase c;
  c.name = "conv2d_backward_data_add " + conv_params_name(d, false) + " N" + std::to_string(d.n) + " " +
           std::to_string(d.h) + "x" + std::to_string(d.w) + " C" + std::to_string(d.c) + "->O" + std::to_string(d.o);
  c.ops = {"conv2d_backward_data_add", "conv2d_backward_data", "add_inplace"};
  c.make_inputs = [=] {
    return NamedTensors{
        {"dy", random_tensor(ys, seed)}, {"w", random_tensor(ws, seed + 1)}, {"shortcut", random_tensor(xs, seed + 2)}};
  };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    const Tensor dy = on(ctx, input(in, "dy")), w = on(ctx, input(in, "w"));
    Tensor dx = copy_on(ctx, input(in, "shortcut"));
    ops::conv2d_backward_data_add(ctx, p, dy, w, dx);
    Tensor apart = nan_on(ctx, xs), sum = copy_on(ctx, input(in, "shortcut"));
    ops::conv2d_backward_data(ctx, p, dy, w, apart);
    ops::add_inplace(ctx, sum, apart);
    ctx.synchronize();
    return NamedTensors{{"dx", to_cpu(dx)}, {"dx apart", to_cpu(sum)}};
  };
  c.reference = [=](const NamedTensors& in) {
    std::vector<double> dx = reference_conv2d_backward_data(d, values(in, "dy"), values(in, "w"));
    const std::vector<double> shortcut = values(in, "shortcut");
    for (std::size_t i = 0; i < dx.size(); ++i) dx[i] += shortcut[i];
    return NamedValues{{"dx", dx}, {"dx apart", dx}};
  };
  // The input gradient's terms, and the shortcut's one.
  const Tolerance t = fp32_sum(d.o / d.groups * d.kh * d.kw + 1);
  c.outputs = {{"dx", t, twice(t)}, {"dx apart", t, twice(t)}};
  return c;
}

// --fuse conv-bias-relu's op: y = max(0, conv(x, w) + b) against the reference convolution's
// output clamped at 0; and the unfused pair (conv2d_forward with its bias, then relu_forward) must
// give y too. Forward only: its backward is the ReLU's and the convolution's, checked above.
OpCase conv2d_bias_relu_case(const RefConv2dDims& d, uint64_t seed) {
  const Shape xs{d.n, d.h, d.w, d.c}, ws{d.o, d.group_channels(), d.kh, d.kw}, ys{d.n, d.oh(), d.ow(), d.o}, bs{d.o};
  const ops::Conv2dParams p = conv_params_of(d);
  OpCase c;
  c.name = "conv2d_bias_relu " + conv_params_name(d, true) + " N" + std::to_string(d.n) + " " + std::to_string(d.h) +
           "x" + std::to_string(d.w) + " C" + std::to_string(d.c) + "->O" + std::to_string(d.o);
  c.ops = {"conv2d_bias_relu_forward", "conv2d_forward", "relu_forward"};
  c.make_inputs = [=] {
    return NamedTensors{
        {"x", random_tensor(xs, seed)}, {"w", random_tensor(ws, seed + 1)}, {"b", random_tensor(bs, seed + 2)}};
  };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    const Tensor x = on(ctx, input(in, "x")), w = on(ctx, input(in, "w")), b = on(ctx, input(in, "b"));
    Tensor y = nan_on(ctx, ys), apart = nan_on(ctx, ys);
    ops::conv2d_bias_relu_forward(ctx, p, x, w, b, y);
    ops::conv2d_forward(ctx, p, x, w, b, apart);
    ops::relu_forward(ctx, apart, apart);
    ctx.synchronize();
    return NamedTensors{{"y", to_cpu(y)}, {"y_apart", to_cpu(apart)}};
  };
  c.reference = [=](const NamedTensors& in) {
    std::vector<double> y = reference_conv2d_forward(d, values(in, "x"), values(in, "w"), values(in, "b"));
    for (double& v : y) v = v < 0.0 ? 0.0 : v;
    return NamedValues{{"y", y}, {"y_apart", y}};
  };
  const Tolerance ty = fp32_sum(d.group_channels() * d.kh * d.kw + 1);
  c.outputs = {{"y", ty, twice(ty)}, {"y_apart", ty, twice(ty)}};
  return c;
}

// conv2d_bn_stats_forward (cuDNN's fused ConvBNfprop graph on a GPU): y, sum and sqsum against
// the float64 reference of max(0, x * scale + bias) (or x, without the prologue) convolved with w,
// and y's per-channel sums over N, OH and OW; and y_apart, the same through the unfused ops: the
// prologue as batch_norm_forward_inference with mean 0 and var + eps = 1 (so that scale and bias
// are its gamma and beta), relu_forward, then conv2d_forward.
OpCase conv2d_bn_stats_case(const RefConv2dDims& d, bool prologue, uint64_t seed) {
  const Shape xs{d.n, d.h, d.w, d.c}, ws{d.o, d.c, d.kh, d.kw}, ys{d.n, d.oh(), d.ow(), d.o};
  const ops::Conv2dParams p = conv_params_of(d);
  OpCase c;
  c.name = std::string("conv2d_bn_stats ") + (prologue ? "scale-bias-relu " : "") + conv_params_name(d, false) + " N" +
           std::to_string(d.n) + " " + std::to_string(d.h) + "x" + std::to_string(d.w) + " C" + std::to_string(d.c) +
           "->O" + std::to_string(d.o);
  c.ops = {"conv2d_bn_stats_forward", "conv2d_forward"};
  if (prologue) c.ops.insert(c.ops.end(), {"batch_norm_forward_inference", "relu_forward"});
  c.make_inputs = [=] {
    NamedTensors in{{"x", random_tensor(xs, seed)}, {"w", random_tensor(ws, seed + 1)}};
    if (prologue) {
      in.emplace_back("scale", random_tensor({d.c}, seed + 2, 0.5, 1.5));
      in.emplace_back("bias", random_tensor({d.c}, seed + 3, -0.5, 0.5));
    }
    return in;
  };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    const Tensor x = on(ctx, input(in, "x")), w = on(ctx, input(in, "w"));
    const Tensor scale = prologue ? on(ctx, input(in, "scale")) : Tensor();
    const Tensor bias = prologue ? on(ctx, input(in, "bias")) : Tensor();
    Tensor y = nan_on(ctx, ys), sum = nan_on(ctx, {d.o}), sqsum = nan_on(ctx, {d.o}), apart = nan_on(ctx, ys);
    ops::conv2d_bn_stats_forward(ctx, p, x, scale, bias, w, y, sum, sqsum);
    Tensor a = x;
    if (prologue) {
      a = nan_on(ctx, xs);
      Tensor mean = Tensor::zeros({d.c}, DType::f32).to(ctx.device());
      Tensor var = Tensor::empty({d.c}, DType::f32, ctx.device());
      var.fill(0.75f);
      ops::BatchNormParams bn;
      bn.eps = 0.25f;  // var + eps = 1 exactly
      ops::batch_norm_forward_inference(ctx, bn, x, scale, bias, mean, var, a);
      ops::relu_forward(ctx, a, a);
    }
    ops::conv2d_forward(ctx, p, a, w, Tensor(), apart);
    ctx.synchronize();
    return NamedTensors{{"y", to_cpu(y)}, {"sum", to_cpu(sum)}, {"sqsum", to_cpu(sqsum)}, {"y_apart", to_cpu(apart)}};
  };
  c.reference = [=](const NamedTensors& in) {
    std::vector<double> a = values(in, "x");
    if (prologue) {
      const auto s = values(in, "scale"), b = values(in, "bias");
      for (std::size_t i = 0; i < a.size(); ++i) a[i] = std::max(0.0, a[i] * s[i % d.c] + b[i % d.c]);
    }
    const std::vector<double> y = reference_conv2d_forward(d, a, values(in, "w"), {});
    std::vector<double> sum(static_cast<std::size_t>(d.o), 0.0), sqsum(sum);
    for (std::size_t i = 0; i < y.size(); ++i) sum[i % d.o] += y[i], sqsum[i % d.o] += y[i] * y[i];
    return NamedValues{{"y", y}, {"sum", sum}, {"sqsum", sqsum}, {"y_apart", y}};
  };
  // y: a sum of C*KH*KW terms, each from inputs the prologue rounded twice more. The sums add
  // M = N*OH*OW such y, each within ty of exact and at most Y = C*KH*KW * 2 (|a| <= 2, |w| <= 1) in
  // magnitude: M times y's error, and for the squares 2Y times that.
  const Tolerance ty = fp32_sum(d.c * d.kh * d.kw + 2);
  const double m = static_cast<double>(d.n * d.oh() * d.ow()), largest = 2.0 * static_cast<double>(d.c * d.kh * d.kw);
  const double y_error = ty.abs + ty.rel * largest;
  const Tolerance tsum{m * y_error, ty.rel}, tsqsum{m * 2 * largest * y_error, ty.rel};
  c.outputs = {
      {"y", ty, twice(ty)}, {"sum", tsum, twice(tsum)}, {"sqsum", tsqsum, twice(tsqsum)}, {"y_apart", ty, twice(ty)}};
  return c;
}

// The ResNet-era cases: a square stride and padding, one group, no bias.
OpCase conv2d_case(const ConvShape& s, uint64_t seed) {
  return conv2d_case(RefConv2dDims::square(s.n, s.h, s.w, s.c, s.o, s.k, s.kw > 0 ? s.kw : s.k, s.stride, s.padding),
                     false, seed);
}

// ---- batch norm: training forward + backward, and inference ----------------------------------

OpCase batch_norm_training_case(const Shape& shape, double offset, double scale, uint64_t seed) {
  const int64_t channels = shape.back();
  const int64_t rows = shape_numel(shape) / channels;
  const Shape cs{channels};
  const ops::BatchNormParams p;
  OpCase c;
  std::ostringstream name;
  name << "batch_norm training " << dims(shape);
  if (offset != 0.0) name << " mean " << offset;
  c.name = name.str();
  c.ops = {"batch_norm_forward_training", "batch_norm_backward"};
  c.make_inputs = [=] {
    return NamedTensors{{"x", random_tensor(shape, seed, offset - scale, offset + scale)},
                        {"gamma", random_tensor(cs, seed + 1, 0.5, 1.5)},
                        {"beta", random_tensor(cs, seed + 2)},
                        {"running_mean", random_tensor(cs, seed + 3)},
                        {"running_var", random_tensor(cs, seed + 4, 0.5, 2.0)},
                        {"dy", random_tensor(shape, seed + 5)}};
  };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    const Tensor x = on(ctx, input(in, "x")), gamma = on(ctx, input(in, "gamma")), beta = on(ctx, input(in, "beta"));
    const Tensor dy = on(ctx, input(in, "dy"));
    Tensor running_mean = copy_on(ctx, input(in, "running_mean")), running_var = copy_on(ctx, input(in, "running_var"));
    Tensor y = nan_on(ctx, shape), saved_mean = nan_on(ctx, cs), saved_inv_std = nan_on(ctx, cs);
    ops::batch_norm_forward_training(ctx, p, x, gamma, beta, running_mean, running_var, y, saved_mean, saved_inv_std);
    // Backward with this backend's own saved statistics, as a layer runs it.
    Tensor dx = nan_on(ctx, shape), dgamma = nan_on(ctx, cs), dbeta = nan_on(ctx, cs);
    ops::batch_norm_backward(ctx, p, x, dy, gamma, saved_mean, saved_inv_std, dx, dgamma, dbeta);
    ctx.synchronize();
    return NamedTensors{{"y", to_cpu(y)},
                        {"saved_mean", to_cpu(saved_mean)},
                        {"saved_inv_std", to_cpu(saved_inv_std)},
                        {"running_mean", to_cpu(running_mean)},
                        {"running_var", to_cpu(running_var)},
                        {"dx", to_cpu(dx)},
                        {"dgamma", to_cpu(dgamma)},
                        {"dbeta", to_cpu(dbeta)}};
  };
  c.reference = [=](const NamedTensors& in) {
    const auto x = values(in, "x"), gamma = values(in, "gamma");
    const BatchNormTrainingRef f =
        reference_batch_norm_forward_training(x, channels, gamma, values(in, "beta"), values(in, "running_mean"),
                                              values(in, "running_var"), p.eps, p.momentum);
    const BatchNormBackwardRef b = reference_batch_norm_backward(x, values(in, "dy"), channels, gamma, p.eps);
    return NamedValues{{"y", f.y},
                       {"saved_mean", f.mean},
                       {"saved_inv_std", f.inv_std},
                       {"running_mean", f.running_mean},
                       {"running_var", f.running_var},
                       {"dx", b.dx},
                       {"dgamma", b.dgamma},
                       {"dbeta", b.dbeta}};
  };
  // The mean of values near `offset` is good to float32 epsilons of |offset| + scale; y and dx
  // go through 1/std, and dx subtracts two sums over the rows, hence its larger relative slack.
  const double size = std::fabs(offset) + scale;
  const Tolerance ty{1e-5, 1e-5}, tmean{1e-6 * size, 1e-6}, tinv{0.0, 1e-5}, trm{1e-6 * size, 1e-6}, trv{1e-6, 1e-5},
      tdx{1e-5, 1e-4}, tsum = fp32_sum(rows);
  c.outputs = {{"y", ty, twice(ty)},
               {"saved_mean", tmean, twice(tmean)},
               {"saved_inv_std", tinv, twice(tinv)},
               {"running_mean", trm, twice(trm)},
               {"running_var", trv, twice(trv)},
               {"dx", tdx, twice(tdx)},
               {"dgamma", tsum, twice(tsum)},
               {"dbeta", tsum, twice(tsum)}};
  c.gradients = {{"x", "dx", "y", "dy"}, {"gamma", "dgamma", "y", "dy"}, {"beta", "dbeta", "y", "dy"}};
  return c;
}

OpCase batch_norm_inference_case(const Shape& shape, uint64_t seed) {
  const int64_t channels = shape.back();
  const Shape cs{channels};
  const ops::BatchNormParams p;
  OpCase c;
  c.name = "batch_norm inference " + dims(shape);
  c.ops = {"batch_norm_forward_inference"};
  c.make_inputs = [=] {
    return NamedTensors{{"x", random_tensor(shape, seed)},
                        {"gamma", random_tensor(cs, seed + 1, 0.5, 1.5)},
                        {"beta", random_tensor(cs, seed + 2)},
                        {"running_mean", random_tensor(cs, seed + 3)},
                        {"running_var", random_tensor(cs, seed + 4, 0.5, 2.0)}};
  };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    Tensor y = nan_on(ctx, shape);
    ops::batch_norm_forward_inference(ctx, p, on(ctx, input(in, "x")), on(ctx, input(in, "gamma")),
                                      on(ctx, input(in, "beta")), on(ctx, input(in, "running_mean")),
                                      on(ctx, input(in, "running_var")), y);
    ctx.synchronize();
    return NamedTensors{{"y", to_cpu(y)}};
  };
  c.reference = [=](const NamedTensors& in) {
    return NamedValues{
        {"y", reference_batch_norm_forward_inference(values(in, "x"), channels, values(in, "gamma"), values(in, "beta"),
                                                     values(in, "running_mean"), values(in, "running_var"), p.eps)}};
  };
  // y = (x - mean) * gamma / sqrt(var + eps) + beta has terms up to about 4 in size: a few ulps
  // of those, however the backend groups the arithmetic.
  const Tolerance ty{2e-6, 1e-5};
  c.outputs = {{"y", ty, twice(ty)}};
  return c;
}

// ---- batch norm + add + ReLU, fused (--fuse bn-add-relu) ---------------------------------------

// What a fused batch norm case's run returns, in the order of fused_batch_norm_outputs; dz (the
// add's gradient) only where given.
NamedTensors fused_batch_norm_results(const Tensor& y, const Tensor& saved_mean, const Tensor& saved_inv_std,
                                      const Tensor& running_mean, const Tensor& running_var, const Tensor& dx,
                                      const Tensor* dz, const Tensor& dgamma, const Tensor& dbeta) {
  NamedTensors r{{"y", to_cpu(y)},
                 {"saved_mean", to_cpu(saved_mean)},
                 {"saved_inv_std", to_cpu(saved_inv_std)},
                 {"running_mean", to_cpu(running_mean)},
                 {"running_var", to_cpu(running_var)},
                 {"dx", to_cpu(dx)}};
  if (dz != nullptr) r.emplace_back("dz", to_cpu(*dz));
  r.emplace_back("dgamma", to_cpu(dgamma));
  r.emplace_back("dbeta", to_cpu(dbeta));
  return r;
}

// Their tolerances: batch norm's, with dz (a mask of dy) exact.
std::vector<OutputTolerance> fused_batch_norm_outputs(int64_t rows, bool with_dz) {
  const Tolerance ty{2e-5, 1e-5}, tmean{1e-6, 1e-6}, tinv{0.0, 1e-5}, trm{1e-6, 1e-6}, trv{1e-6, 1e-5}, tdx{1e-5, 1e-4},
      exact{}, tsum = fp32_sum(rows);
  std::vector<OutputTolerance> outputs{{"y", ty, twice(ty)},
                                       {"saved_mean", tmean, twice(tmean)},
                                       {"saved_inv_std", tinv, twice(tinv)},
                                       {"running_mean", trm, twice(trm)},
                                       {"running_var", trv, twice(trv)},
                                       {"dx", tdx, twice(tdx)}};
  if (with_dz) outputs.push_back({"dz", exact, exact});
  outputs.push_back({"dgamma", tsum, twice(tsum)});
  outputs.push_back({"dbeta", tsum, twice(tsum)});
  return outputs;
}

// z is drawn so that bn(x) + z stays at least 0.1 from ReLU's kink (bn(x) from the float64
// reference): every backend then gives the same mask, and finite differences do not straddle it.
OpCase batch_norm_add_relu_case(const Shape& shape, uint64_t seed) {
  const int64_t channels = shape.back();
  const int64_t rows = shape_numel(shape) / channels;
  const Shape cs{channels};
  const ops::BatchNormParams p;
  OpCase c;
  c.name = "batch_norm_add_relu training " + dims(shape);
  c.ops = {"batch_norm_add_relu_forward_training", "batch_norm_add_relu_backward"};
  c.make_inputs = [=] {
    NamedTensors in{{"x", random_tensor(shape, seed)},
                    {"gamma", random_tensor(cs, seed + 1, 0.5, 1.5)},
                    {"beta", random_tensor(cs, seed + 2)},
                    {"running_mean", random_tensor(cs, seed + 3)},
                    {"running_var", random_tensor(cs, seed + 4, 0.5, 2.0)},
                    {"dy", random_tensor(shape, seed + 5)}};
    const BatchNormTrainingRef f =
        reference_batch_norm_forward_training(values(in, "x"), channels, values(in, "gamma"), values(in, "beta"),
                                              values(in, "running_mean"), values(in, "running_var"), p.eps, p.momentum);
    std::vector<double> z = random_floats(f.y.size(), seed + 6, 0.1, 1.0);
    for (std::size_t i = 0; i < z.size(); ++i) z[i] = (i % 3 == 0 ? -z[i] : z[i]) - f.y[i];
    in.emplace_back("z", to_tensor(z, shape));
    return in;
  };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    const Tensor x = on(ctx, input(in, "x")), z = on(ctx, input(in, "z")), gamma = on(ctx, input(in, "gamma"));
    const Tensor beta = on(ctx, input(in, "beta")), dy = on(ctx, input(in, "dy"));
    Tensor running_mean = copy_on(ctx, input(in, "running_mean")), running_var = copy_on(ctx, input(in, "running_var"));
    Tensor y = nan_on(ctx, shape), saved_mean = nan_on(ctx, cs), saved_inv_std = nan_on(ctx, cs), reserve;
    ops::batch_norm_add_relu_forward_training(ctx, p, x, z, gamma, beta, running_mean, running_var, y, saved_mean,
                                              saved_inv_std, reserve);
    Tensor dx = nan_on(ctx, shape), dz = nan_on(ctx, shape), dgamma = nan_on(ctx, cs), dbeta = nan_on(ctx, cs);
    ops::batch_norm_add_relu_backward(ctx, p, x, y, dy, gamma, beta, saved_mean, saved_inv_std, reserve, dx, dz, dgamma,
                                      dbeta);
    ctx.synchronize();
    return fused_batch_norm_results(y, saved_mean, saved_inv_std, running_mean, running_var, dx, &dz, dgamma, dbeta);
  };
  c.reference = [=](const NamedTensors& in) {
    const auto x = values(in, "x"), gamma = values(in, "gamma"), z = values(in, "z"), dy = values(in, "dy");
    const BatchNormTrainingRef f =
        reference_batch_norm_forward_training(x, channels, gamma, values(in, "beta"), values(in, "running_mean"),
                                              values(in, "running_var"), p.eps, p.momentum);
    std::vector<double> y(f.y.size()), dz(f.y.size());
    for (std::size_t i = 0; i < y.size(); ++i) {
      y[i] = std::max(0.0, f.y[i] + z[i]);
      dz[i] = y[i] > 0.0 ? dy[i] : 0.0;
    }
    const BatchNormBackwardRef b = reference_batch_norm_backward(x, dz, channels, gamma, p.eps);
    return NamedValues{{"y", y},
                       {"saved_mean", f.mean},
                       {"saved_inv_std", f.inv_std},
                       {"running_mean", f.running_mean},
                       {"running_var", f.running_var},
                       {"dx", b.dx},
                       {"dz", dz},
                       {"dgamma", b.dgamma},
                       {"dbeta", b.dbeta}};
  };
  c.outputs = fused_batch_norm_outputs(rows, true);
  c.gradients = {
      {"x", "dx", "y", "dy"}, {"z", "dz", "y", "dy"}, {"gamma", "dgamma", "y", "dy"}, {"beta", "dbeta", "y", "dy"}};
  return c;
}

// ---- batch norm + ReLU, fused (--fuse bn-relu) -------------------------------------------------

// x holds, per channel, pairs of values +u and -u (u in [0.3, 1]), so the batch mean is 0 and
// every normalised value is at least 0.3 standard deviations from it; with gamma in [0.5, 1.5] and
// beta within 0.05 of 0 each bn(x) is then at least 0.1 from ReLU's kink: every backend gives the
// same mask, and finite differences do not straddle it.
OpCase batch_norm_relu_case(const Shape& shape, uint64_t seed) {
  const int64_t channels = shape.back();
  const int64_t rows = shape_numel(shape) / channels;
  const Shape cs{channels};
  const ops::BatchNormParams p;
  OpCase c;
  c.name = "batch_norm_relu training " + dims(shape);
  c.ops = {"batch_norm_relu_forward_training", "batch_norm_relu_backward"};
  c.make_inputs = [=] {
    const std::vector<double> u = random_floats(static_cast<std::size_t>(rows / 2 * channels), seed, 0.3, 1.0);
    std::vector<double> x(static_cast<std::size_t>(rows * channels), 0.0);
    for (int64_t r = 0; r < rows / 2; ++r)
      for (int64_t j = 0; j < channels; ++j) {
        x[r * channels + j] = u[r * channels + j];
        x[(rows / 2 + r) * channels + j] = -u[r * channels + j];
      }
    return NamedTensors{{"x", to_tensor(x, shape)},
                        {"gamma", random_tensor(cs, seed + 1, 0.5, 1.5)},
                        {"beta", random_tensor(cs, seed + 2, -0.05, 0.05)},
                        {"running_mean", random_tensor(cs, seed + 3)},
                        {"running_var", random_tensor(cs, seed + 4, 0.5, 2.0)},
                        {"dy", random_tensor(shape, seed + 5)}};
  };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    const Tensor x = on(ctx, input(in, "x")), gamma = on(ctx, input(in, "gamma"));
    const Tensor beta = on(ctx, input(in, "beta")), dy = on(ctx, input(in, "dy"));
    Tensor running_mean = copy_on(ctx, input(in, "running_mean")), running_var = copy_on(ctx, input(in, "running_var"));
    Tensor y = nan_on(ctx, shape), saved_mean = nan_on(ctx, cs), saved_inv_std = nan_on(ctx, cs), reserve;
    ops::batch_norm_relu_forward_training(ctx, p, x, gamma, beta, running_mean, running_var, y, saved_mean,
                                          saved_inv_std, reserve);
    Tensor dx = nan_on(ctx, shape), dgamma = nan_on(ctx, cs), dbeta = nan_on(ctx, cs);
    ops::batch_norm_relu_backward(ctx, p, x, y, dy, gamma, beta, saved_mean, saved_inv_std, reserve, dx, dgamma, dbeta);
    ctx.synchronize();
    return fused_batch_norm_results(y, saved_mean, saved_inv_std, running_mean, running_var, dx, nullptr, dgamma,
                                    dbeta);
  };
  c.reference = [=](const NamedTensors& in) {
    const auto x = values(in, "x"), gamma = values(in, "gamma"), dy = values(in, "dy");
    const BatchNormTrainingRef f =
        reference_batch_norm_forward_training(x, channels, gamma, values(in, "beta"), values(in, "running_mean"),
                                              values(in, "running_var"), p.eps, p.momentum);
    std::vector<double> y(f.y.size()), dz(f.y.size());
    for (std::size_t i = 0; i < y.size(); ++i) {
      y[i] = std::max(0.0, f.y[i]);
      dz[i] = y[i] > 0.0 ? dy[i] : 0.0;
    }
    const BatchNormBackwardRef b = reference_batch_norm_backward(x, dz, channels, gamma, p.eps);
    return NamedValues{{"y", y},
                       {"saved_mean", f.mean},
                       {"saved_inv_std", f.inv_std},
                       {"running_mean", f.running_mean},
                       {"running_var", f.running_var},
                       {"dx", b.dx},
                       {"dgamma", b.dgamma},
                       {"dbeta", b.dbeta}};
  };
  c.outputs = fused_batch_norm_outputs(rows, false);
  c.gradients = {{"x", "dx", "y", "dy"}, {"gamma", "dgamma", "y", "dy"}, {"beta", "dbeta", "y", "dy"}};
  return c;
}

// ---- relu and add ------------------------------------------------------------------------------

// in_place: y aliases x and dx aliases dy, as the layers may run them. zeros: every fifth input
// is exactly 0, ReLU's kink, where y is 0 and the gradient is gated off.
OpCase relu_case(const Shape& shape, bool in_place, uint64_t seed, bool zeros = false) {
  OpCase c;
  c.name = "relu " + dims(shape) + (in_place ? " in place" : "") + (zeros ? " zeros" : "");
  c.ops = {"relu_forward", "relu_backward"};
  c.make_inputs = [=] {
    Tensor x = random_tensor(shape, seed);
    if (zeros)
      for (int64_t i = 3; i < x.numel(); i += 5) x.data<float>()[i] = 0.0f;
    return NamedTensors{{"x", x}, {"dy", random_tensor(shape, seed + 1)}};
  };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    Tensor y, dx;
    if (in_place) {
      y = copy_on(ctx, input(in, "x"));
      dx = copy_on(ctx, input(in, "dy"));
      ops::relu_forward(ctx, y, y);
      ops::relu_backward(ctx, y, dx, dx);
    } else {
      y = nan_on(ctx, shape);
      dx = nan_on(ctx, shape);
      ops::relu_forward(ctx, on(ctx, input(in, "x")), y);
      ops::relu_backward(ctx, y, on(ctx, input(in, "dy")), dx);
    }
    ctx.synchronize();
    return NamedTensors{{"y", to_cpu(y)}, {"dx", to_cpu(dx)}};
  };
  c.reference = [=](const NamedTensors& in) {
    const auto y = reference_relu_forward(values(in, "x"));
    return NamedValues{{"y", y}, {"dx", reference_relu_backward(y, values(in, "dy"))}};
  };
  c.outputs = {{"y", kExact, kExact}, {"dx", kExact, kExact}};
  c.gradients = {{"x", "dx", "y", "dy"}};
  return c;
}

OpCase add_case(const Shape& shape, uint64_t seed) {
  OpCase c;
  c.name = "add " + dims(shape);
  c.ops = {"add_forward", "add_inplace"};
  c.make_inputs = [=] {
    return NamedTensors{{"a", random_tensor(shape, seed)}, {"b", random_tensor(shape, seed + 1)}};
  };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    const Tensor a = on(ctx, input(in, "a")), b = on(ctx, input(in, "b"));
    Tensor y = nan_on(ctx, shape);
    ops::add_forward(ctx, a, b, y);
    Tensor acc = copy_on(ctx, input(in, "a"));
    ops::add_inplace(ctx, acc, b);
    ctx.synchronize();
    return NamedTensors{{"y", to_cpu(y)}, {"a+=b", to_cpu(acc)}};
  };
  c.reference = [=](const NamedTensors& in) {
    const auto y = reference_add(values(in, "a"), values(in, "b"));
    return NamedValues{{"y", y}, {"a+=b", y}};
  };
  // IEEE addition is correctly rounded on every backend.
  c.outputs = {{"y", kOneRounding, kExact}, {"a+=b", kOneRounding, kExact}};
  return c;
}

// ---- dropout ----------------------------------------------------------------------------------

// Forward and backward at one (p, key, position), out of place and in place (y over x, dx over
// dy, as a layer may run them). The mask is a function of the params alone, so the backward's
// must be the forward's, and the central differences of the forward (linear in x for a fixed
// mask) check the backward.
OpCase dropout_case(const Shape& shape, double p, uint64_t position, uint64_t seed) {
  ops::DropoutParams params;
  params.p = p;
  params.key[0] = static_cast<uint32_t>(seed * 0x9E3779B9u);
  params.key[1] = static_cast<uint32_t>(seed) ^ 0xA5A5A5A5u;
  params.position = position;
  const std::array<uint32_t, 2> key{params.key[0], params.key[1]};
  OpCase c;
  std::ostringstream name;
  name << "dropout " << dims(shape) << " p " << p << " position " << position;
  c.name = name.str();
  c.ops = {"dropout_forward", "dropout_backward"};
  c.make_inputs = [=] {
    return NamedTensors{{"x", random_tensor(shape, seed)}, {"dy", random_tensor(shape, seed + 1)}};
  };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    Tensor y = nan_on(ctx, shape), dx = nan_on(ctx, shape);
    ops::dropout_forward(ctx, params, on(ctx, input(in, "x")), y);
    ops::dropout_backward(ctx, params, on(ctx, input(in, "dy")), dx);
    Tensor y_in_place = copy_on(ctx, input(in, "x")), dx_in_place = copy_on(ctx, input(in, "dy"));
    ops::dropout_forward(ctx, params, y_in_place, y_in_place);
    ops::dropout_backward(ctx, params, dx_in_place, dx_in_place);
    ctx.synchronize();
    return NamedTensors{
        {"y", to_cpu(y)}, {"dx", to_cpu(dx)}, {"y in place", to_cpu(y_in_place)}, {"dx in place", to_cpu(dx_in_place)}};
  };
  c.reference = [=](const NamedTensors& in) {
    const auto y = reference_dropout(values(in, "x"), p, key, position);
    const auto dx = reference_dropout(values(in, "dy"), p, key, position);
    return NamedValues{{"y", y}, {"dx", dx}, {"y in place", y}, {"dx in place", dx}};
  };
  // One float product of x and the float scale, rounded once; the mask is integer arithmetic, so
  // the backends agree bit for bit.
  c.outputs = {{"y", kOneRounding, kExact},
               {"dx", kOneRounding, kExact},
               {"y in place", kOneRounding, kExact},
               {"dx in place", kOneRounding, kExact}};
  c.gradients = {{"x", "dx", "y", "dy"}};
  return c;
}

// ---- pooling ------------------------------------------------------------------------------------

OpCase max_pool_case(const PoolGeometry& g, uint64_t seed) {
  const Shape xs{g.n, g.h, g.w, g.c}, ys{g.n, g.oh(), g.ow(), g.c};
  const ops::MaxPool2dParams p{static_cast<int>(g.kernel), static_cast<int>(g.stride), static_cast<int>(g.padding),
                               g.ceil_mode};
  OpCase c;
  c.name = "max_pool2d k" + std::to_string(g.kernel) + " s" + std::to_string(g.stride) + " p" +
           std::to_string(g.padding) + (g.ceil_mode ? " ceil " : " ") + dims(xs);
  c.ops = {"max_pool2d_forward", "max_pool2d_backward"};
  c.make_inputs = [=] { return NamedTensors{{"x", random_tensor(xs, seed)}, {"dy", random_tensor(ys, seed + 1)}}; };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    const Tensor x = on(ctx, input(in, "x"));
    Tensor y = nan_on(ctx, ys), dx = nan_on(ctx, xs);
    ops::max_pool2d_forward(ctx, p, x, y);
    ops::max_pool2d_backward(ctx, p, x, y, on(ctx, input(in, "dy")), dx);
    ctx.synchronize();
    return NamedTensors{{"y", to_cpu(y)}, {"dx", to_cpu(dx)}};
  };
  c.reference = [=](const NamedTensors& in) {
    const auto x = values(in, "x");
    return NamedValues{{"y", reference_max_pool2d_forward(g, x)},
                       {"dx", reference_max_pool2d_backward(g, x, values(in, "dy"))}};
  };
  // y selects an input; an element of dx sums the dy of the (at most ceil(k/s)^2) windows whose
  // maximum it is, in an order the backend picks.
  const Tolerance tdx{2e-6, 1e-6};
  c.outputs = {{"y", kExact, kExact}, {"dx", tdx, twice(tdx)}};
  c.gradients = {{"x", "dx", "y", "dy"}};
  return c;
}

// y and dx: the CPU sums in double in the reference's order and divides by the same divisor, so
// both are the reference's value rounded once to float32; the CUDA kernels take the same windows
// (src/ops/pool_windows.hpp) and sum in the same order, so no backend may differ.
OpCase avg_pool_case(const PoolGeometry& g, uint64_t seed) {
  const Shape xs{g.n, g.h, g.w, g.c}, ys{g.n, g.oh(), g.ow(), g.c};
  const ops::AvgPool2dParams p{static_cast<int>(g.kernel), static_cast<int>(g.stride), static_cast<int>(g.padding),
                               g.ceil_mode, g.count_include_pad};
  OpCase c;
  c.name = "avg_pool2d k" + std::to_string(g.kernel) + " s" + std::to_string(g.stride) + " p" +
           std::to_string(g.padding) + (g.ceil_mode ? " ceil" : "") +
           (g.count_include_pad ? " include_pad " : " exclude_pad ") + dims(xs);
  c.ops = {"avg_pool2d_forward", "avg_pool2d_backward"};
  c.make_inputs = [=] { return NamedTensors{{"x", random_tensor(xs, seed)}, {"dy", random_tensor(ys, seed + 1)}}; };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    Tensor y = nan_on(ctx, ys), dx = nan_on(ctx, xs);
    ops::avg_pool2d_forward(ctx, p, on(ctx, input(in, "x")), y);
    ops::avg_pool2d_backward(ctx, p, on(ctx, input(in, "dy")), dx);
    ctx.synchronize();
    return NamedTensors{{"y", to_cpu(y)}, {"dx", to_cpu(dx)}};
  };
  c.reference = [=](const NamedTensors& in) {
    return NamedValues{{"y", reference_avg_pool2d_forward(g, values(in, "x"))},
                       {"dx", reference_avg_pool2d_backward(g, values(in, "dy"))}};
  };
  c.outputs = {{"y", kOneRounding, kExact}, {"dx", kOneRounding, kExact}};
  c.gradients = {{"x", "dx", "y", "dy"}};
  return c;
}

// As avg_pool_case: one rounding of the reference's double, the same bits on every backend.
OpCase adaptive_avg_pool_case(const AdaptiveGeometry& g, uint64_t seed) {
  const Shape xs{g.n, g.h, g.w, g.c}, ys{g.n, g.oh, g.ow, g.c};
  const ops::AdaptiveAvgPool2dParams p{static_cast<int>(g.oh), static_cast<int>(g.ow)};
  OpCase c;
  c.name = "adaptive_avg_pool2d " + dims(xs) + " -> " + std::to_string(g.oh) + "x" + std::to_string(g.ow);
  c.ops = {"adaptive_avg_pool2d_forward", "adaptive_avg_pool2d_backward"};
  c.make_inputs = [=] { return NamedTensors{{"x", random_tensor(xs, seed)}, {"dy", random_tensor(ys, seed + 1)}}; };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    Tensor y = nan_on(ctx, ys), dx = nan_on(ctx, xs);
    ops::adaptive_avg_pool2d_forward(ctx, p, on(ctx, input(in, "x")), y);
    ops::adaptive_avg_pool2d_backward(ctx, p, on(ctx, input(in, "dy")), dx);
    ctx.synchronize();
    return NamedTensors{{"y", to_cpu(y)}, {"dx", to_cpu(dx)}};
  };
  c.reference = [=](const NamedTensors& in) {
    return NamedValues{{"y", reference_adaptive_avg_pool2d_forward(g, values(in, "x"))},
                       {"dx", reference_adaptive_avg_pool2d_backward(g, values(in, "dy"))}};
  };
  c.outputs = {{"y", kOneRounding, kExact}, {"dx", kOneRounding, kExact}};
  c.gradients = {{"x", "dx", "y", "dy"}};
  return c;
}

OpCase global_avg_pool_case(const Shape& xs, uint64_t seed) {
  const int64_t n = xs[0], h = xs[1], w = xs[2], ch = xs[3];
  const Shape ys{n, ch};
  OpCase c;
  c.name = "global_avg_pool " + dims(xs);
  c.ops = {"global_avg_pool_forward", "global_avg_pool_backward"};
  c.make_inputs = [=] { return NamedTensors{{"x", random_tensor(xs, seed)}, {"dy", random_tensor(ys, seed + 1)}}; };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    Tensor y = nan_on(ctx, ys), dx = nan_on(ctx, xs);
    ops::global_avg_pool_forward(ctx, on(ctx, input(in, "x")), y);
    ops::global_avg_pool_backward(ctx, on(ctx, input(in, "dy")), dx);
    ctx.synchronize();
    return NamedTensors{{"y", to_cpu(y)}, {"dx", to_cpu(dx)}};
  };
  c.reference = [=](const NamedTensors& in) {
    return NamedValues{{"y", reference_global_avg_pool_forward(values(in, "x"), n, h, w, ch)},
                       {"dx", reference_global_avg_pool_backward(values(in, "dy"), n, h, w, ch)}};
  };
  // y: a mean of H*W values; dx: dy / (H*W), one or two roundings.
  const Tolerance ty = fp32_sum(h * w), tdx{1e-7, 2e-7};
  c.outputs = {{"y", ty, twice(ty)}, {"dx", tdx, twice(tdx)}};
  c.gradients = {{"x", "dx", "y", "dy"}};
  return c;
}

// ---- linear -----------------------------------------------------------------------------------

// with_dx false: the first layer's case, where the input needs no gradient and dx is undefined.
OpCase linear_case(int64_t n, int64_t in_features, int64_t out_features, bool with_dx, uint64_t seed) {
  const Shape xs{n, in_features}, ws{out_features, in_features}, bs{out_features}, ys{n, out_features};
  OpCase c;
  c.name = "linear N" + std::to_string(n) + " " + std::to_string(in_features) + "->" + std::to_string(out_features) +
           (with_dx ? "" : " no dx");
  c.ops = {"linear_forward", "linear_backward"};
  c.make_inputs = [=] {
    return NamedTensors{{"x", random_tensor(xs, seed)},
                        {"w", random_tensor(ws, seed + 1)},
                        {"b", random_tensor(bs, seed + 2)},
                        {"dy", random_tensor(ys, seed + 3)}};
  };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    const Tensor x = on(ctx, input(in, "x")), w = on(ctx, input(in, "w")), dy = on(ctx, input(in, "dy"));
    Tensor y = nan_on(ctx, ys), dw = nan_on(ctx, ws), db = nan_on(ctx, bs);
    Tensor dx = with_dx ? nan_on(ctx, xs) : Tensor();
    ops::linear_forward(ctx, x, w, on(ctx, input(in, "b")), y);
    ops::linear_backward(ctx, x, w, dy, dx, dw, db);
    ctx.synchronize();
    NamedTensors out{{"y", to_cpu(y)}};
    if (with_dx) out.emplace_back("dx", to_cpu(dx));
    out.emplace_back("dw", to_cpu(dw));
    out.emplace_back("db", to_cpu(db));
    return out;
  };
  c.reference = [=](const NamedTensors& in) {
    const auto x = values(in, "x"), w = values(in, "w");
    const RefLinearGrads g = reference_linear_backward(n, in_features, out_features, x, w, values(in, "dy"));
    NamedValues out{{"y", reference_linear_forward(n, in_features, out_features, x, w, values(in, "b"))}};
    if (with_dx) out.emplace_back("dx", g.dx);
    out.emplace_back("dw", g.dw);
    out.emplace_back("db", g.db);
    return out;
  };
  const Tolerance ty = fp32_sum(in_features + 1), tdx = fp32_sum(out_features), tdw = fp32_sum(n);
  c.outputs = {{"y", ty, twice(ty)}};
  if (with_dx) c.outputs.push_back({"dx", tdx, twice(tdx)});
  c.outputs.push_back({"dw", tdw, twice(tdw)});
  c.outputs.push_back({"db", tdw, twice(tdw)});
  c.gradients = {{"w", "dw", "y", "dy"}, {"b", "db", "y", "dy"}};
  if (with_dx) c.gradients.push_back({"x", "dx", "y", "dy"});
  return c;
}

// ---- loss and accuracy ------------------------------------------------------------------------

Tensor random_labels(int64_t n, int64_t k, uint64_t seed) {
  Rng rng(seed);
  Tensor t = Tensor::empty({n}, DType::i32);
  for (int64_t i = 0; i < n; ++i) t.data<int32_t>()[i] = static_cast<int32_t>(rng.below(static_cast<uint64_t>(k)));
  return t;
}

// logit_scale widens the logits' range: 20 gives differences of e^40, where a softmax that does
// not subtract the row's maximum overflows. grad_scale weighs the loss as an auxiliary head's
// (--aux-loss-weight): dlogits is the gradient of grad_scale * loss, which the case also returns.
OpCase softmax_cross_entropy_case(int64_t n, int64_t k, double smoothing, double logit_scale, uint64_t seed,
                                  double grad_scale = 1.0) {
  const Shape ls{n, k};
  OpCase c;
  std::ostringstream name;
  name << "softmax_cross_entropy N" << n << " K" << k << " smoothing " << smoothing;
  if (logit_scale != 1.0) name << " logits x" << logit_scale;
  if (grad_scale != 1.0) name << " weight " << grad_scale;
  c.name = name.str();
  c.ops = {"softmax_cross_entropy"};
  c.make_inputs = [=] {
    return NamedTensors{{"logits", random_tensor(ls, seed, -logit_scale, logit_scale)},
                        {"labels", random_labels(n, k, seed + 1)}};
  };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    Tensor dlogits = nan_on(ctx, ls);
    const double loss = ops::softmax_cross_entropy(ctx, on(ctx, input(in, "logits")), on(ctx, input(in, "labels")),
                                                   static_cast<float>(smoothing), dlogits, grad_scale);
    ctx.synchronize();
    return NamedTensors{
        {"loss", scalar_f32(loss)}, {"weighted_loss", scalar_f32(grad_scale * loss)}, {"dlogits", to_cpu(dlogits)}};
  };
  c.reference = [=](const NamedTensors& in) {
    std::vector<double> dlogits;
    const double loss = reference_softmax_cross_entropy(n, k, values(in, "logits"), labels_of(in), smoothing, &dlogits);
    for (double& d : dlogits) d *= grad_scale;
    return NamedValues{{"loss", {loss}}, {"weighted_loss", {grad_scale * loss}}, {"dlogits", dlogits}};
  };
  // The loss is a mean of log-sum-exps over K; dlogits are probabilities / N, small where K is
  // large, so their absolute slack is tiny.
  const Tolerance tloss{1e-6, 1e-6}, td{1e-8, 1e-5};
  c.outputs = {{"loss", tloss, twice(tloss)}, {"weighted_loss", tloss, twice(tloss)}, {"dlogits", td, twice(td)}};
  c.gradients = {{"logits", "dlogits", "weighted_loss", ""}};
  return c;
}

// tied: logits are whole numbers 0..3, so most rows have tied maxima; a third of the labels are
// the first maximum (counted) and a third the last (counted only where it is also the first).
OpCase count_correct_case(int64_t n, int64_t k, bool tied, uint64_t seed) {
  const Shape ls{n, k};
  OpCase c;
  c.name = "count_correct N" + std::to_string(n) + " K" + std::to_string(k) + (tied ? " tied maxima" : "");
  c.ops = {"count_correct"};
  c.make_inputs = [=] {
    std::vector<double> logits =
        random_floats(static_cast<std::size_t>(n * k), seed, tied ? 0.0 : -1.0, tied ? 4.0 : 1.0);
    if (tied)
      for (double& v : logits) v = std::floor(v);
    Tensor labels = random_labels(n, k, seed + 1);
    for (int64_t i = 0; i < n; ++i) {
      const double* row = logits.data() + i * k;
      const double top = *std::max_element(row, row + k);
      int64_t first = -1, last = -1;
      for (int64_t j = 0; j < k; ++j) {
        if (row[j] != top) continue;
        if (first < 0) first = j;
        last = j;
      }
      if (i % 3 == 0) labels.data<int32_t>()[i] = static_cast<int32_t>(first);
      if (i % 3 == 1) labels.data<int32_t>()[i] = static_cast<int32_t>(last);
    }
    return NamedTensors{{"logits", to_tensor(logits, ls)}, {"labels", labels}};
  };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    const int64_t correct = count_correct_on(ctx, on(ctx, input(in, "logits")), on(ctx, input(in, "labels")));
    return NamedTensors{{"correct", scalar_i64(correct)}};
  };
  c.reference = [=](const NamedTensors& in) {
    const auto logits = values(in, "logits");
    const auto labels = labels_of(in);
    int64_t correct = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double* row = logits.data() + i * k;
      correct += (std::max_element(row, row + k) - row) == labels[i];  // max_element: the first maximum
    }
    return NamedValues{{"correct", {static_cast<double>(correct)}}};
  };
  c.outputs = {{"correct", kExact, kExact}};
  return c;
}

// ---- local response normalisation and NCHW flatten (AlexNet, GoogLeNet) -----------------------

// x uniform in [-scale, scale] (or [0, scale] when nonnegative): with AlexNet's alpha = 1e-4 the
// window sum only matters at its activations' scale (tens to hundreds), where s = k + alpha/n *
// sum x^2 is of order 1 to 10.
OpCase lrn_case(const Shape& xs, const ops::LrnParams& p, double scale, bool nonnegative, uint64_t seed) {
  const int64_t channels = xs.back();
  const RefLrnParams rp{p.size, p.alpha, p.beta, p.k};
  OpCase c;
  std::ostringstream name;
  name << "lrn n" << p.size << " alpha " << p.alpha << " beta " << p.beta << " k " << p.k << " " << dims(xs)
       << " x in [" << (nonnegative ? 0.0 : -scale) << ", " << scale << "]";
  c.name = name.str();
  c.ops = {"lrn_forward", "lrn_backward"};
  c.make_inputs = [=] {
    return NamedTensors{{"x", random_tensor(xs, seed, nonnegative ? 0.0 : -scale, scale)},
                        {"dy", random_tensor(xs, seed + 1)}};
  };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    const Tensor x = on(ctx, input(in, "x"));
    Tensor y = nan_on(ctx, xs), dx = nan_on(ctx, xs);
    ops::lrn_forward(ctx, p, x, y);
    ops::lrn_backward(ctx, p, x, on(ctx, input(in, "dy")), dx);
    ctx.synchronize();
    return NamedTensors{{"y", to_cpu(y)}, {"dx", to_cpu(dx)}};
  };
  c.reference = [=](const NamedTensors& in) {
    const auto x = values(in, "x");
    return NamedValues{{"y", reference_lrn_forward(rp, channels, x)},
                       {"dx", reference_lrn_backward(rp, channels, x, values(in, "dy"))}};
  };
  // y: a short float sum of squares and a pow, a few ulps of y. dx: two terms of up to
  // ~|dy| s^-beta each that may cancel, so the slack is absolute at their size (|dy| <= 1).
  const Tolerance ty{1e-30, 2e-6}, tdx{2e-6, 1e-5};
  c.outputs = {{"y", ty, twice(ty)}, {"dx", tdx, twice(tdx)}};
  c.gradients = {{"x", "dx", "y", "dy"}};
  return c;
}

// ---- layer normalisation (the Transformer) -------------------------------------------------------

// x uniform in [offset - scale, offset + scale]: a row with a large mean and a small spread is
// where a one-pass or float variance loses its digits.
OpCase layer_norm_case(const Shape& xs, double offset, double scale, uint64_t seed) {
  const int64_t d = xs.back(), rows = shape_numel(xs) / d;
  const Shape ds{d}, ms{rows};
  const ops::LayerNormParams p{1e-6f};  // the MLPerf reference Transformer's epsilon
  OpCase c;
  std::ostringstream name;
  name << "layer_norm " << dims(xs);
  if (offset != 0.0) name << " mean " << offset << " spread " << scale;
  c.name = name.str();
  c.ops = {"layer_norm_forward", "layer_norm_backward"};
  c.make_inputs = [=] {
    return NamedTensors{{"x", random_tensor(xs, seed, offset - scale, offset + scale)},
                        {"gamma", random_tensor(ds, seed + 1, 0.5, 1.5)},
                        {"beta", random_tensor(ds, seed + 2)},
                        {"dy", random_tensor(xs, seed + 3)}};
  };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    const Tensor x = on(ctx, input(in, "x")), gamma = on(ctx, input(in, "gamma")), beta = on(ctx, input(in, "beta"));
    Tensor y = nan_on(ctx, xs), mean = nan_on(ctx, ms), rstd = nan_on(ctx, ms);
    ops::layer_norm_forward(ctx, p, x, gamma, beta, y, mean, rstd);
    Tensor dx = nan_on(ctx, xs), dgamma = nan_on(ctx, ds), dbeta = nan_on(ctx, ds);
    ops::layer_norm_backward(ctx, x, on(ctx, input(in, "dy")), gamma, mean, rstd, dx, dgamma, dbeta);
    ctx.synchronize();
    return NamedTensors{{"y", to_cpu(y)},   {"saved_mean", to_cpu(mean)}, {"saved_rstd", to_cpu(rstd)},
                        {"dx", to_cpu(dx)}, {"dgamma", to_cpu(dgamma)},   {"dbeta", to_cpu(dbeta)}};
  };
  c.reference = [=](const NamedTensors& in) {
    const auto x = values(in, "x"), gamma = values(in, "gamma");
    const LayerNormForwardRef f = reference_layer_norm_forward(x, d, gamma, values(in, "beta"), p.eps);
    const LayerNormBackwardRef b = reference_layer_norm_backward(x, values(in, "dy"), d, gamma, p.eps);
    return NamedValues{{"y", f.y},   {"saved_mean", f.mean}, {"saved_rstd", f.rstd},
                       {"dx", b.dx}, {"dgamma", b.dgamma},   {"dbeta", b.dbeta}};
  };
  // The statistics are float64 sums rounded once; y and dx go through the rounded rstd (relative
  // 6e-8) and x's distance from the mean, which loses |offset| / scale of x's digits; dx subtracts
  // row sums that may cancel. dgamma and dbeta: float64 column sums, rounded once.
  const double digits = (std::fabs(offset) + scale) / scale;
  const Tolerance ty{1e-6 * digits, 1e-5}, tmean{1e-7 * (std::fabs(offset) + scale), 1e-6}, trstd{0.0, 1e-6},
      tdx{1e-5 * digits, 1e-4}, tsum{1e-6 * digits, 1e-5};
  c.outputs = {{"y", ty, twice(ty)},    {"saved_mean", tmean, twice(tmean)}, {"saved_rstd", trstd, twice(trstd)},
               {"dx", tdx, twice(tdx)}, {"dgamma", tsum, twice(tsum)},       {"dbeta", tsum, twice(tsum)}};
  c.gradients = {{"x", "dx", "y", "dy"}, {"gamma", "dgamma", "y", "dy"}, {"beta", "dbeta", "y", "dy"}};
  return c;
}

// ---- masked softmax over attention scores (the Transformer) -------------------------------------

// Scores uniform in [-scale, scale] (20: differences of e^40, where a softmax that does not
// subtract the row's maximum overflows); key lengths drawn in [1, Lk], the first at Lk.
OpCase masked_softmax_case(const Shape& xs, bool causal, double scale, uint64_t seed) {
  const RefScores rs{xs[0], xs[1], xs[2], xs[3]};
  OpCase c;
  std::ostringstream name;
  name << "masked_softmax " << dims(xs) << (causal ? " causal" : "") << " scores in [" << -scale << ", " << scale
       << "]";
  c.name = name.str();
  c.ops = {"masked_softmax_forward", "masked_softmax_backward"};
  c.make_inputs = [=] {
    Tensor lengths = Tensor::empty({rs.n}, DType::i32);
    Rng rng(seed + 2);
    for (int64_t b = 0; b < rs.n; ++b)
      lengths.data<int32_t>()[b] =
          b == 0 ? static_cast<int32_t>(rs.lk) : 1 + static_cast<int32_t>(rng.below(static_cast<uint64_t>(rs.lk)));
    return NamedTensors{
        {"x", random_tensor(xs, seed, -scale, scale)}, {"key_lengths", lengths}, {"dy", random_tensor(xs, seed + 1)}};
  };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    Tensor y = nan_on(ctx, xs), dx = nan_on(ctx, xs);
    ops::masked_softmax_forward(ctx, ops::SoftmaxMask{causal}, on(ctx, input(in, "x")),
                                on(ctx, input(in, "key_lengths")), y);
    ops::masked_softmax_backward(ctx, y, on(ctx, input(in, "dy")), dx);
    ctx.synchronize();
    return NamedTensors{{"y", to_cpu(y)}, {"dx", to_cpu(dx)}};
  };
  c.reference = [=](const NamedTensors& in) {
    const Tensor& l = input(in, "key_lengths");
    const std::vector<int32_t> lengths(l.data<int32_t>(), l.data<int32_t>() + l.numel());
    const auto y = reference_masked_softmax(rs, values(in, "x"), lengths, causal);
    return NamedValues{{"y", y}, {"dx", reference_masked_softmax_backward(rs, y, values(in, "dy"))}};
  };
  // Probabilities are rounded once from float64 (a few 1e-8 absolute where they are near 1);
  // dx subtracts a row sum of up to Lk terms.
  const Tolerance ty{1e-8, 1e-6}, tdx{1e-7, 1e-5};
  c.outputs = {{"y", ty, twice(ty)}, {"dx", tdx, twice(tdx)}};
  c.gradients = {{"x", "dx", "y", "dy"}};
  return c;
}

// ---- batched matrix products (attention) --------------------------------------------------------

// c = alpha op(a) op(b), then its gradients computed with the op itself, as attention's backward
// does: each transpose combination of the forward exercises the others in the gradients.
OpCase batched_matmul_case(const RefMatmulDims& d, float alpha, uint64_t seed) {
  const Shape as = d.trans_a ? Shape{d.batch, d.k, d.m} : Shape{d.batch, d.m, d.k};
  const Shape bs = d.trans_b ? Shape{d.batch, d.n, d.k} : Shape{d.batch, d.k, d.n};
  const Shape cs{d.batch, d.m, d.n};
  OpCase c;
  std::ostringstream name;
  name << "batched_matmul B" << d.batch << " M" << d.m << " K" << d.k << " N" << d.n << (d.trans_a ? " a^T" : "")
       << (d.trans_b ? " b^T" : "") << " alpha " << alpha;
  c.name = name.str();
  c.ops = {"batched_matmul"};
  c.make_inputs = [=] {
    return NamedTensors{
        {"a", random_tensor(as, seed)}, {"b", random_tensor(bs, seed + 1)}, {"dc", random_tensor(cs, seed + 2)}};
  };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    const Tensor a = on(ctx, input(in, "a")), b = on(ctx, input(in, "b")), dc = on(ctx, input(in, "dc"));
    Tensor out = nan_on(ctx, cs), da = nan_on(ctx, as), db = nan_on(ctx, bs);
    ops::batched_matmul(ctx, {d.trans_a, d.trans_b, alpha}, a, b, out);
    // da = alpha dc op(b)^T, stored transposed when a is; db = alpha op(a)^T dc, likewise.
    if (!d.trans_a)
      ops::batched_matmul(ctx, {false, !d.trans_b, alpha}, dc, b, da);
    else
      ops::batched_matmul(ctx, {d.trans_b, true, alpha}, b, dc, da);
    if (!d.trans_b)
      ops::batched_matmul(ctx, {!d.trans_a, false, alpha}, a, dc, db);
    else
      ops::batched_matmul(ctx, {true, d.trans_a, alpha}, dc, a, db);
    ctx.synchronize();
    return NamedTensors{{"c", to_cpu(out)}, {"da", to_cpu(da)}, {"db", to_cpu(db)}};
  };
  c.reference = [=](const NamedTensors& in) {
    const auto a = values(in, "a"), b = values(in, "b"), dc = values(in, "dc");
    return NamedValues{{"c", reference_batched_matmul(d, alpha, a, b)},
                       {"da", reference_batched_matmul_da(d, alpha, b, dc)},
                       {"db", reference_batched_matmul_db(d, alpha, a, dc)}};
  };
  const double scale = std::fabs(alpha);
  const Tolerance tc = fp32_sum(d.k), tda = fp32_sum(d.n), tdb = fp32_sum(d.m);
  const auto scaled = [scale](Tolerance t) { return Tolerance{t.abs * scale, t.rel}; };
  c.outputs = {{"c", scaled(tc), twice(scaled(tc))},
               {"da", scaled(tda), twice(scaled(tda))},
               {"db", scaled(tdb), twice(scaled(tdb))}};
  // With K = 0, a and b are empty: nothing to differentiate (the case checks c = 0).
  if (d.k > 0) c.gradients = {{"a", "da", "c", "dc"}, {"b", "db", "c", "dc"}};
  return c;
}

// ---- the heads' transpose (attention) -----------------------------------------------------------

// (A, B, C, D) -> (A, C, B, D) and back (the op with B and C exchanged): the gradient of the
// forward is the op applied to dy.
OpCase swap_middle_axes_case(const Shape& xs, uint64_t seed) {
  const Shape ys{xs[0], xs[2], xs[1], xs[3]};
  OpCase c;
  c.name = "swap_middle_axes " + dims(xs);
  c.ops = {"swap_middle_axes"};
  c.make_inputs = [=] { return NamedTensors{{"x", random_tensor(xs, seed)}, {"dy", random_tensor(ys, seed + 1)}}; };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    Tensor y = nan_on(ctx, ys), dx = nan_on(ctx, xs);
    ops::swap_middle_axes(ctx, on(ctx, input(in, "x")), y);
    ops::swap_middle_axes(ctx, on(ctx, input(in, "dy")), dx);
    ctx.synchronize();
    return NamedTensors{{"y", to_cpu(y)}, {"dx", to_cpu(dx)}};
  };
  // y[a][c][b][d] = x[a][b][c][d], by index arithmetic written out here.
  const auto swap = [](const Shape& s, const std::vector<double>& v) {
    std::vector<double> out(v.size());
    for (int64_t a = 0; a < s[0]; ++a)
      for (int64_t b = 0; b < s[1]; ++b)
        for (int64_t cc = 0; cc < s[2]; ++cc)
          for (int64_t d = 0; d < s[3]; ++d)
            out[((a * s[2] + cc) * s[1] + b) * s[3] + d] = v[((a * s[1] + b) * s[2] + cc) * s[3] + d];
    return out;
  };
  c.reference = [=](const NamedTensors& in) {
    return NamedValues{{"y", swap(xs, values(in, "x"))}, {"dx", swap(ys, values(in, "dy"))}};
  };
  c.outputs = {{"y", kExact, kExact}, {"dx", kExact, kExact}};  // copies
  c.gradients = {{"x", "dx", "y", "dy"}};
  return c;
}

// ---- token cross-entropy (the Transformer's loss) ------------------------------------------------

// T tokens of a V-word vocabulary, every third one padding (label = ignore_index, the pad id 0 of
// the reference's vocabulary, so class 0 is never a target), normalised by `normaliser` real tokens
// (the global batch's, more than this call's).
OpCase token_cross_entropy_case(int64_t t, int64_t v, double smoothing, double normaliser, uint64_t seed) {
  const Shape ls{t, v};
  constexpr int32_t kPad = 0;
  OpCase c;
  std::ostringstream name;
  name << "token_cross_entropy T" << t << " V" << v << " smoothing " << smoothing << " normaliser " << normaliser;
  c.name = name.str();
  c.ops = {"token_cross_entropy"};
  c.make_inputs = [=] {
    Tensor labels = Tensor::empty({t}, DType::i32);
    Rng rng(seed + 1);
    for (int64_t i = 0; i < t; ++i)
      labels.data<int32_t>()[i] = i % 3 == 2 ? kPad : 1 + static_cast<int32_t>(rng.below(static_cast<uint64_t>(v - 1)));
    return NamedTensors{{"logits", random_tensor(ls, seed, -3.0, 3.0)}, {"labels", labels}};
  };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    Tensor dlogits = nan_on(ctx, ls);
    const ops::TokenLoss r = ops::token_cross_entropy(ctx, on(ctx, input(in, "logits")), on(ctx, input(in, "labels")),
                                                      static_cast<float>(smoothing), kPad, normaliser, dlogits);
    ctx.synchronize();
    return NamedTensors{{"loss_sum", scalar_f32(r.sum)},
                        {"loss", scalar_f32(r.sum / normaliser)},
                        {"tokens", scalar_f32(static_cast<double>(r.tokens))},
                        {"dlogits", to_cpu(dlogits)}};
  };
  c.reference = [=](const NamedTensors& in) {
    // The real tokens' rows through the mean-loss reference, scaled to a sum and to the normaliser.
    const auto logits = values(in, "logits");
    const auto labels = labels_of(in);
    std::vector<double> real_logits;
    std::vector<int32_t> real_labels;
    for (int64_t i = 0; i < t; ++i)
      if (labels[i] != kPad) {
        real_logits.insert(real_logits.end(), logits.begin() + i * v, logits.begin() + (i + 1) * v);
        real_labels.push_back(labels[i]);
      }
    const int64_t n = static_cast<int64_t>(real_labels.size());
    std::vector<double> dreal, dlogits(t * v, 0.0);
    const double mean = reference_softmax_cross_entropy(n, v, real_logits, real_labels, smoothing, &dreal);
    for (int64_t i = 0, r = 0; i < t; ++i)
      if (labels[i] != kPad) {
        for (int64_t j = 0; j < v; ++j) dlogits[i * v + j] = dreal[r * v + j] * static_cast<double>(n) / normaliser;
        ++r;
      }
    return NamedValues{{"loss_sum", {mean * static_cast<double>(n)}},
                       {"loss", {mean * static_cast<double>(n) / normaliser}},
                       {"tokens", {static_cast<double>(n)}},
                       {"dlogits", dlogits}};
  };
  const Tolerance tloss{1e-6, 1e-6}, td{1e-8, 1e-5};
  // dlogits is d(loss)/d(logits) with loss = loss_sum / normaliser: padding rows exactly 0.
  c.outputs = {{"loss_sum", tloss, twice(tloss)},
               {"loss", tloss, twice(tloss)},
               {"tokens", {kExact}, kExact},
               {"dlogits", td, twice(td)}};
  c.gradients = {{"logits", "dlogits", "loss", ""}};
  return c;
}

OpCase flatten_chw_case(const Shape& xs, uint64_t seed) {
  const int64_t n = xs[0], h = xs[1], w = xs[2], ch = xs[3];
  const Shape ys{n, ch * h * w};
  OpCase c;
  c.name = "flatten_chw " + dims(xs);
  c.ops = {"flatten_chw_forward", "flatten_chw_backward"};
  c.make_inputs = [=] { return NamedTensors{{"x", random_tensor(xs, seed)}, {"dy", random_tensor(ys, seed + 1)}}; };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    Tensor y = nan_on(ctx, ys), dx = nan_on(ctx, xs);
    ops::flatten_chw_forward(ctx, on(ctx, input(in, "x")), y);
    ops::flatten_chw_backward(ctx, on(ctx, input(in, "dy")), dx);
    ctx.synchronize();
    return NamedTensors{{"y", to_cpu(y)}, {"dx", to_cpu(dx)}};
  };
  c.reference = [=](const NamedTensors& in) {
    return NamedValues{{"y", reference_flatten_chw_forward(n, h, w, ch, values(in, "x"))},
                       {"dx", reference_flatten_chw_backward(n, h, w, ch, values(in, "dy"))}};
  };
  c.outputs = {{"y", kExact, kExact}, {"dx", kExact, kExact}};  // copies
  c.gradients = {{"x", "dx", "y", "dy"}};
  return c;
}

// ---- image normalisation ----------------------------------------------------------------------

// reversed: RGB pixels to a BGR model (--preprocess caffe), output channel c reading input
// channel C - 1 - c; with caffe_mean, Caffe's mean subtraction (mean m / 255, std 1 / 255: pixel - m).
OpCase normalize_images_case(const Shape& xs, uint64_t seed, ops::ChannelOrder order = ops::ChannelOrder::as_stored,
                             bool caffe_mean = false) {
  const int64_t channels = xs.back();
  const bool reversed = order == ops::ChannelOrder::reversed;
  std::vector<double> mean, std;
  const double imagenet_mean[] = {0.485, 0.456, 0.406}, imagenet_std[] = {0.229, 0.224, 0.225};
  const double caffe_bgr_mean[] = {104, 117, 123};
  for (int64_t ch = 0; ch < channels; ++ch) {
    mean.push_back(channels == 3 ? imagenet_mean[ch] : 0.1 + 0.2 * static_cast<double>(ch));
    std.push_back(channels == 3 ? imagenet_std[ch] : 0.15 + 0.05 * static_cast<double>(ch));
    if (caffe_mean) {
      mean.back() = (channels == 3 ? caffe_bgr_mean[ch] : 100.0 + static_cast<double>(ch)) / 255.0;
      std.back() = 1.0 / 255.0;
    }
  }
  OpCase c;
  c.name = "normalize_images " + dims(xs) + (reversed ? " reversed" : "") + (caffe_mean ? " caffe mean" : "");
  c.ops = {"normalize_images"};
  c.make_inputs = [=] {
    Rng rng(seed);
    Tensor x = Tensor::empty(xs, DType::u8);
    for (int64_t i = 0; i < x.numel(); ++i) x.data<uint8_t>()[i] = static_cast<uint8_t>(rng.below(256));
    x.data<uint8_t>()[0] = 0;  // both ends of the range
    x.data<uint8_t>()[x.numel() - 1] = 255;
    return NamedTensors{{"x", x}};
  };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    Tensor y = nan_on(ctx, xs);
    ops::normalize_images(ctx, on(ctx, input(in, "x")), mean, std, y, order);
    ctx.synchronize();
    return NamedTensors{{"y", to_cpu(y)}};
  };
  // No reference file for this op: the formula is one line, evaluated here in float64.
  c.reference = [=](const NamedTensors& in) {
    const auto x = values(in, "x");
    std::vector<double> y(x.size());
    const auto c_count = static_cast<std::size_t>(channels);
    for (std::size_t i = 0; i < x.size(); ++i) {
      const std::size_t ch = i % c_count;
      y[i] = (x[reversed ? i - ch + (c_count - 1 - ch) : i] / 255.0 - mean[ch]) / std[ch];
    }
    return NamedValues{{"y", y}};
  };
  // normalize.hpp promises one rounding of the float64 value, so backends agree exactly.
  c.outputs = {{"y", kOneRounding, kExact}};
  return c;
}

// ---- NCF's ops: embedding, concat, multiply, sigmoid BCE ----------------------------------------

// indices: N ids in [0, rows), a third of them repeats of the first few ids (the gradient sums them).
Tensor repeated_indices(int64_t n, int64_t rows, uint64_t seed) {
  Rng rng(seed);
  Tensor t = Tensor::empty({n}, DType::i32);
  const auto urows = static_cast<uint64_t>(rows), first_few = std::min<uint64_t>(3, urows);
  for (int64_t i = 0; i < n; ++i)
    t.data<int32_t>()[i] = static_cast<int32_t>(i % 3 == 0 ? rng.below(first_few) : rng.below(urows));
  return t;
}

std::vector<int32_t> int_values(const Tensor& t) {
  const int32_t* p = t.data<int32_t>();
  return std::vector<int32_t>(p, p + t.numel());
}

OpCase embedding_case(int64_t rows, int64_t dim, int64_t n, uint64_t seed) {
  const Shape ts{rows, dim}, os{n, dim};
  OpCase c;
  c.name = "embedding " + std::to_string(rows) + "x" + std::to_string(dim) + " N" + std::to_string(n);
  c.ops = {"embedding_forward", "embedding_backward"};
  c.make_inputs = [=] {
    return NamedTensors{{"table", random_tensor(ts, seed)},
                        {"indices", repeated_indices(n, rows, seed + 1)},
                        {"dout", random_tensor(os, seed + 2)}};
  };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    const Tensor indices = on(ctx, input(in, "indices"));
    Tensor out = nan_on(ctx, os), dtable = nan_on(ctx, ts);
    ops::embedding_forward(ctx, on(ctx, input(in, "table")), indices, out);
    ops::embedding_backward(ctx, indices, on(ctx, input(in, "dout")), dtable);
    ctx.synchronize();
    return NamedTensors{{"out", to_cpu(out)}, {"dtable", to_cpu(dtable)}};
  };
  c.reference = [=](const NamedTensors& in) {
    const std::vector<int32_t> idx = int_values(input(in, "indices"));
    return NamedValues{{"out", reference_embedding_forward(rows, dim, values(in, "table"), idx)},
                       {"dtable", reference_embedding_backward(rows, dim, idx, values(in, "dout"))}};
  };
  // out copies rows; a row of dtable sums the dout of the positions naming it (a third of the
  // positions name one of three rows: up to about n / 9 + a few terms; with fewer than three
  // rows, up to all n).
  const Tolerance tsum = fp32_sum(rows < 3 ? n : n / 3 + 4);
  c.outputs = {{"out", kExact, kExact}, {"dtable", tsum, twice(tsum)}};
  c.gradients = {{"table", "dtable", "out", "dout"}};
  return c;
}

// The Transformer's embedding after the lookup: ids in [0, 3), so a third are padding (masked).
OpCase token_embedding_case(int64_t n, int64_t l, int64_t d, int64_t p, float scale, uint64_t seed) {
  const Shape xs{n, l, d}, ps{p, d};
  OpCase c;
  c.name = "token_embedding " + dims(xs) + " P" + std::to_string(p) + " scale " + std::to_string(scale);
  c.ops = {"token_embedding_forward", "token_embedding_backward"};
  c.make_inputs = [=] {
    Rng rng(seed + 3);
    Tensor ids = Tensor::empty({n, l}, DType::i32);
    for (int64_t i = 0; i < n * l; ++i) ids.data<int32_t>()[i] = static_cast<int32_t>(rng.below(3));
    return NamedTensors{{"x", random_tensor(xs, seed)},
                        {"ids", ids},
                        {"positions", random_tensor(ps, seed + 1)},
                        {"dy", random_tensor(xs, seed + 2)}};
  };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    const Tensor ids = on(ctx, input(in, "ids"));
    Tensor y = nan_on(ctx, xs), dx = nan_on(ctx, xs);
    ops::token_embedding_forward(ctx, on(ctx, input(in, "x")), ids, scale, on(ctx, input(in, "positions")), y);
    ops::token_embedding_backward(ctx, ids, scale, on(ctx, input(in, "dy")), dx);
    ctx.synchronize();
    return NamedTensors{{"y", to_cpu(y)}, {"dx", to_cpu(dx)}};
  };
  c.reference = [=](const NamedTensors& in) {
    const std::vector<int32_t> ids = int_values(input(in, "ids"));
    const auto x = values(in, "x"), pe = values(in, "positions"), dy = values(in, "dy");
    std::vector<double> y(x.size()), dx(x.size());
    for (int64_t r = 0; r < n * l; ++r)
      for (int64_t k = 0; k < d; ++k) {
        const double s = ids[r] != 0 ? scale : 0.0;
        y[r * d + k] = s * x[r * d + k] + pe[(r % l) * d + k];
        dx[r * d + k] = s * dy[r * d + k];
      }
    return NamedValues{{"y", y}, {"dx", dx}};
  };
  // One float multiply and one add: within two roundings of the float64 value.
  const Tolerance t{1e-6, 1e-6};
  c.outputs = {{"y", t, kExact}, {"dx", t, kExact}};
  c.gradients = {{"x", "dx", "y", "dy"}};
  return c;
}

OpCase concat_case(int64_t n, int64_t wa, int64_t wb, uint64_t seed) {
  const Shape as{n, wa}, bs{n, wb}, ys{n, wa + wb};
  OpCase c;
  c.name = "concat_features N" + std::to_string(n) + " " + std::to_string(wa) + "+" + std::to_string(wb);
  c.ops = {"concat_features_forward", "concat_features_backward"};
  c.make_inputs = [=] {
    return NamedTensors{
        {"a", random_tensor(as, seed)}, {"b", random_tensor(bs, seed + 1)}, {"dy", random_tensor(ys, seed + 2)}};
  };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    Tensor y = nan_on(ctx, ys), da = nan_on(ctx, as), db = nan_on(ctx, bs);
    ops::concat_features_forward(ctx, on(ctx, input(in, "a")), on(ctx, input(in, "b")), y);
    ops::concat_features_backward(ctx, on(ctx, input(in, "dy")), da, db);
    ctx.synchronize();
    return NamedTensors{{"y", to_cpu(y)}, {"da", to_cpu(da)}, {"db", to_cpu(db)}};
  };
  c.reference = [=](const NamedTensors& in) {
    std::vector<double> da, db;
    reference_split_features(n, wa, wb, values(in, "dy"), da, db);
    return NamedValues{
        {"y", reference_concat_features(n, wa, wb, values(in, "a"), values(in, "b"))}, {"da", da}, {"db", db}};
  };
  c.outputs = {{"y", kExact, kExact}, {"da", kExact, kExact}, {"db", kExact, kExact}};  // copies
  c.gradients = {{"a", "da", "y", "dy"}, {"b", "db", "y", "dy"}};
  return c;
}

// parts: the channel counts C_i of (lead..., C_i) inputs, joined into (lead..., sum C_i).
OpCase concat_channels_case(const Shape& lead, const std::vector<int64_t>& parts, uint64_t seed) {
  const int64_t rows = shape_numel(lead);
  int64_t total = 0;
  std::vector<Shape> shapes;
  std::string widths;
  for (int64_t w : parts) {
    Shape s = lead;
    s.push_back(w);
    shapes.push_back(s);
    total += w;
    widths += (widths.empty() ? "" : "+") + std::to_string(w);
  }
  Shape ys = lead;
  ys.push_back(total);
  const std::size_t k = parts.size();
  auto x_name = [](std::size_t i) { return "x" + std::to_string(i); };
  auto dx_name = [](std::size_t i) { return "dx" + std::to_string(i); };
  OpCase c;
  c.name = "concat_channels " + (lead.empty() ? std::string("()") : dims(lead)) + " C " + widths;
  c.ops = {"concat_channels_forward", "concat_channels_backward"};
  c.make_inputs = [=] {
    NamedTensors in;
    for (std::size_t i = 0; i < k; ++i) in.emplace_back(x_name(i), random_tensor(shapes[i], seed + i));
    in.emplace_back("dy", random_tensor(ys, seed + k));
    return in;
  };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    std::vector<Tensor> xs, dxs;
    for (std::size_t i = 0; i < k; ++i) {
      xs.push_back(on(ctx, input(in, x_name(i))));
      dxs.push_back(nan_on(ctx, shapes[i]));
    }
    Tensor y = nan_on(ctx, ys);
    ops::concat_channels_forward(ctx, xs, y);
    ops::concat_channels_backward(ctx, on(ctx, input(in, "dy")), dxs);
    ctx.synchronize();
    NamedTensors out{{"y", to_cpu(y)}};
    for (std::size_t i = 0; i < k; ++i) out.emplace_back(dx_name(i), to_cpu(dxs[i]));
    return out;
  };
  c.reference = [=](const NamedTensors& in) {
    std::vector<std::vector<double>> xs;
    for (std::size_t i = 0; i < k; ++i) xs.push_back(values(in, x_name(i)));
    NamedValues out{{"y", reference_concat_channels(rows, parts, xs)}};
    const auto dxs = reference_split_channels(rows, parts, values(in, "dy"));
    for (std::size_t i = 0; i < k; ++i) out.emplace_back(dx_name(i), dxs[i]);
    return out;
  };
  c.outputs = {{"y", kExact, kExact}};  // copies
  for (std::size_t i = 0; i < k; ++i) {
    c.outputs.push_back({dx_name(i), kExact, kExact});
    c.gradients.push_back({x_name(i), dx_name(i), "y", "dy"});
  }
  return c;
}

OpCase multiply_case(const Shape& shape, uint64_t seed) {
  OpCase c;
  c.name = "multiply " + dims(shape);
  c.ops = {"multiply_forward", "multiply_backward"};
  c.make_inputs = [=] {
    return NamedTensors{{"a", random_tensor(shape, seed)},
                        {"b", random_tensor(shape, seed + 1)},
                        {"dy", random_tensor(shape, seed + 2)}};
  };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    const Tensor a = on(ctx, input(in, "a")), b = on(ctx, input(in, "b"));
    Tensor y = nan_on(ctx, shape), da = nan_on(ctx, shape), db = nan_on(ctx, shape);
    ops::multiply_forward(ctx, a, b, y);
    ops::multiply_backward(ctx, a, b, on(ctx, input(in, "dy")), da, db);
    ctx.synchronize();
    return NamedTensors{{"y", to_cpu(y)}, {"da", to_cpu(da)}, {"db", to_cpu(db)}};
  };
  c.reference = [=](const NamedTensors& in) {
    const auto a = values(in, "a"), b = values(in, "b");
    std::vector<double> da, db;
    reference_multiply_backward(a, b, values(in, "dy"), da, db);
    return NamedValues{{"y", reference_multiply(a, b)}, {"da", da}, {"db", db}};
  };
  // A product of two floats rounded once, on every backend.
  c.outputs = {{"y", kOneRounding, kExact}, {"da", kOneRounding, kExact}, {"db", kOneRounding, kExact}};
  c.gradients = {{"a", "da", "y", "dy"}, {"b", "db", "y", "dy"}};
  return c;
}

// targets 0 or 1 as NCF's; logit_scale 30 reaches the saturated range where a naive
// log(sigmoid) underflows.
OpCase sigmoid_bce_case(const Shape& shape, double logit_scale, uint64_t seed) {
  const int64_t n = shape_numel(shape);
  OpCase c;
  c.name = "sigmoid_bce_with_logits " + dims(shape) +
           (logit_scale != 1.0 ? " logits x" + std::to_string(int(logit_scale)) : "");
  c.ops = {"sigmoid_bce_with_logits"};
  c.make_inputs = [=] {
    std::vector<double> targets = random_floats(static_cast<std::size_t>(n), seed + 1, 0.0, 1.0);
    for (double& t : targets) t = t < 0.5 ? 0.0 : 1.0;
    return NamedTensors{{"logits", random_tensor(shape, seed, -logit_scale, logit_scale)},
                        {"targets", to_tensor(targets, shape)}};
  };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    Tensor dlogits = nan_on(ctx, shape);
    const double loss =
        ops::sigmoid_bce_with_logits(ctx, on(ctx, input(in, "logits")), on(ctx, input(in, "targets")), dlogits);
    ctx.synchronize();
    return NamedTensors{{"loss", scalar_f32(loss)}, {"dlogits", to_cpu(dlogits)}};
  };
  c.reference = [=](const NamedTensors& in) {
    std::vector<double> d;
    const double loss = reference_sigmoid_bce(values(in, "logits"), values(in, "targets"), &d);
    return NamedValues{{"loss", {loss}}, {"dlogits", d}};
  };
  // The loss: a mean of n terms of size up to logit_scale; dlogits: (sigmoid - y) / n.
  const Tolerance tloss{1e-6 * logit_scale, 1e-6}, td{1e-9, 1e-5};
  c.outputs = {{"loss", tloss, twice(tloss)}, {"dlogits", td, twice(td)}};
  c.gradients = {{"logits", "dlogits", "loss", ""}};
  return c;
}

// ---- optimizer updates and gradient accumulation ----------------------------------------------

// The float update's rounding against the double reference: a few ulps of the largest term.
constexpr Tolerance kUpdateRounding{1e-6, 1e-5};

OpCase sgd_update_case(int64_t n, bool nesterov, uint64_t seed) {
  const ops::SgdUpdateParams p{0.1f, 0.9f, 5e-4f, nesterov};
  OpCase c;
  c.name = "sgd_update " + std::to_string(n) + (nesterov ? " nesterov" : "");
  c.ops = {"sgd_update"};
  c.make_inputs = [=] {
    return NamedTensors{
        {"w", random_tensor({n}, seed)}, {"grad", random_tensor({n}, seed + 1)}, {"v", random_tensor({n}, seed + 2)}};
  };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    Tensor w = copy_on(ctx, input(in, "w")), v = copy_on(ctx, input(in, "v"));
    ops::sgd_update(ctx, p, w, on(ctx, input(in, "grad")), v);
    ctx.synchronize();
    return NamedTensors{{"w", to_cpu(w)}, {"v", to_cpu(v)}};
  };
  c.reference = [=](const NamedTensors& in) {
    auto w = values(in, "w"), v = values(in, "v");
    const auto g = values(in, "grad");
    for (int64_t i = 0; i < n; ++i) {
      const double gi = g[i] + double(p.weight_decay) * w[i];
      v[i] = double(p.momentum) * v[i] + gi;
      w[i] -= double(p.lr) * (nesterov ? gi + double(p.momentum) * v[i] : v[i]);
    }
    return NamedValues{{"w", w}, {"v", v}};
  };
  // Every backend rounds the same float operations in the same order (no FMA): the same bits.
  c.outputs = {{"w", kUpdateRounding, kExact}, {"v", kUpdateRounding, kExact}};
  return c;
}

OpCase adam_update_case(int64_t n, int step, uint64_t seed) {
  const double beta1 = 0.9, beta2 = 0.999, lr = 0.01;
  ops::AdamUpdateParams p;
  p.beta1 = float(beta1), p.one_minus_beta1 = float(1.0 - beta1), p.beta2 = float(beta2);
  p.one_minus_beta2 = float(1.0 - beta2), p.epsilon = 1e-8f;
  p.bias_correction2_sqrt = float(std::sqrt(1.0 - std::pow(beta2, step)));
  p.neg_step_size = float(-lr / (1.0 - std::pow(beta1, step)));
  OpCase c;
  c.name = "adam_update " + std::to_string(n) + " step " + std::to_string(step);
  c.ops = {"adam_update"};
  c.make_inputs = [=] {
    return NamedTensors{{"w", random_tensor({n}, seed)},
                        {"grad", random_tensor({n}, seed + 1)},
                        {"m", random_tensor({n}, seed + 2, -0.1, 0.1)},
                        {"v", random_tensor({n}, seed + 3, 0.0, 0.01)}};
  };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    Tensor w = copy_on(ctx, input(in, "w")), m = copy_on(ctx, input(in, "m")), v = copy_on(ctx, input(in, "v"));
    ops::adam_update(ctx, p, w, on(ctx, input(in, "grad")), m, v);
    ctx.synchronize();
    return NamedTensors{{"w", to_cpu(w)}, {"m", to_cpu(m)}, {"v", to_cpu(v)}};
  };
  c.reference = [=](const NamedTensors& in) {
    auto w = values(in, "w"), m = values(in, "m"), v = values(in, "v");
    const auto g = values(in, "grad");
    for (int64_t i = 0; i < n; ++i) {
      m[i] = beta1 * m[i] + (1.0 - beta1) * g[i];
      v[i] = beta2 * v[i] + (1.0 - beta2) * g[i] * g[i];
      const double denom = std::sqrt(v[i]) / double(p.bias_correction2_sqrt) + 1e-8;
      w[i] += double(p.neg_step_size) * m[i] / denom;
    }
    return NamedValues{{"w", w}, {"m", m}, {"v", v}};
  };
  // m / denom can reach ~1 with denom near eps-sized: the update's relative rounding, a few ulps.
  // Backends: the same IEEE operations in the same order; a few ulps allowed for another sqrt.
  const Tolerance tw{1e-6, 1e-5}, backend{1e-7, 5e-7};
  c.outputs = {{"w", tw, backend}, {"m", kUpdateRounding, backend}, {"v", kUpdateRounding, backend}};
  return c;
}

// lazy_adam_update on a rows x width table whose gradient leaves every third row all zeros (rows
// no sample looked up) and every fifth row zero but for its last element (touched: the row test
// must look past the first element). Untouched rows keep w, m and v; the others get Adam's update.
OpCase lazy_adam_update_case(int64_t rows, int64_t width, int step, uint64_t seed) {
  const double beta1 = 0.9, beta2 = 0.98, lr = 0.01;
  ops::AdamUpdateParams p;
  p.beta1 = float(beta1), p.one_minus_beta1 = float(1.0 - beta1), p.beta2 = float(beta2);
  p.one_minus_beta2 = float(1.0 - beta2), p.epsilon = 1e-9f;
  p.bias_correction2_sqrt = float(std::sqrt(1.0 - std::pow(beta2, step)));
  p.neg_step_size = float(-lr / (1.0 - std::pow(beta1, step)));
  const int64_t n = rows * width;
  OpCase c;
  c.name = "lazy_adam_update " + std::to_string(rows) + "x" + std::to_string(width) + " step " + std::to_string(step);
  c.ops = {"lazy_adam_update"};
  c.make_inputs = [=] {
    std::vector<double> g = random_floats(static_cast<std::size_t>(n), seed + 1);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < width; ++j)
        if (r % 3 == 1 || (r % 5 == 0 && j != width - 1)) g[r * width + j] = 0.0;
    return NamedTensors{{"w", random_tensor({n}, seed)},
                        {"grad", to_tensor(g, {n})},
                        {"m", random_tensor({n}, seed + 2, -0.1, 0.1)},
                        {"v", random_tensor({n}, seed + 3, 0.0, 0.01)}};
  };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    Tensor w = copy_on(ctx, input(in, "w")), m = copy_on(ctx, input(in, "m")), v = copy_on(ctx, input(in, "v"));
    ops::lazy_adam_update(ctx, p, w, on(ctx, input(in, "grad")), m, v, width);
    ctx.synchronize();
    return NamedTensors{{"w", to_cpu(w)}, {"m", to_cpu(m)}, {"v", to_cpu(v)}};
  };
  c.reference = [=](const NamedTensors& in) {
    auto w = values(in, "w"), m = values(in, "m"), v = values(in, "v");
    const auto g = values(in, "grad");
    for (int64_t r = 0; r < rows; ++r) {
      if (r % 3 == 1) continue;  // untouched: everything as it was
      for (int64_t i = r * width; i < (r + 1) * width; ++i) {
        m[i] = beta1 * m[i] + (1.0 - beta1) * g[i];
        v[i] = beta2 * v[i] + (1.0 - beta2) * g[i] * g[i];
        const double denom = std::sqrt(v[i]) / double(p.bias_correction2_sqrt) + 1e-9;
        w[i] += double(p.neg_step_size) * m[i] / denom;
      }
    }
    return NamedValues{{"w", w}, {"m", m}, {"v", v}};
  };
  // As adam_update's case: the same element arithmetic.
  const Tolerance tw{1e-6, 1e-5}, backend{1e-7, 5e-7};
  c.outputs = {{"w", tw, backend}, {"m", kUpdateRounding, backend}, {"v", kUpdateRounding, backend}};
  return c;
}

// Three tensors' worth of chunks in one flat buffer: sizes 5000, 17, 40000 in chunks of 4096.
std::vector<ops::LarsChunk> lars_chunks(int64_t n) {
  std::vector<ops::LarsChunk> chunks;
  for (int64_t begin = 0; begin < n; begin += 4096) chunks.push_back({begin, std::min(n, begin + 4096)});
  return chunks;
}

OpCase lars_case(int64_t n, uint64_t seed) {
  const std::vector<ops::LarsChunk> chunks = lars_chunks(n);
  std::vector<float> lr(chunks.size()), wd(chunks.size());
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    lr[c] = 0.05f * static_cast<float>(c + 1);
    wd[c] = c % 2 ? 5e-5f : 0.0f;
  }
  OpCase c;
  c.name = "lars " + std::to_string(n) + " in " + std::to_string(chunks.size()) + " chunks";
  c.ops = {"lars_sums_of_squares", "lars_update"};
  c.make_inputs = [=] {
    return NamedTensors{
        {"w", random_tensor({n}, seed)}, {"g", random_tensor({n}, seed + 1)}, {"v", random_tensor({n}, seed + 2)}};
  };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    const Tensor g = on(ctx, input(in, "g"));
    Tensor w = copy_on(ctx, input(in, "w")), v = copy_on(ctx, input(in, "v"));
    std::vector<double> w_sq, g_sq;
    ops::lars_sums_of_squares(ctx, w, g, chunks, w_sq, g_sq);
    ops::lars_update(ctx, 0.9f, chunks, lr, wd, w, g, v);
    ctx.synchronize();
    return NamedTensors{{"w_sq", to_tensor(w_sq, {int64_t(chunks.size())})},
                        {"g_sq", to_tensor(g_sq, {int64_t(chunks.size())})},
                        {"w", to_cpu(w)},
                        {"v", to_cpu(v)}};
  };
  c.reference = [=](const NamedTensors& in) {
    auto w = values(in, "w"), v = values(in, "v");
    const auto g = values(in, "g");
    std::vector<double> w_sq(chunks.size()), g_sq(chunks.size());
    for (std::size_t k = 0; k < chunks.size(); ++k)
      for (int64_t i = chunks[k].begin; i < chunks[k].end; ++i) {
        w_sq[k] += w[i] * w[i];
        g_sq[k] += g[i] * g[i];
        v[i] = 0.9 * v[i] + double(lr[k]) * (g[i] + double(wd[k]) * w[i]);
        w[i] -= v[i];
      }
    return NamedValues{{"w_sq", w_sq}, {"g_sq", g_sq}, {"w", w}, {"v", v}};
  };
  // The sums in double (a float32 result: one rounding); the update, float rounding as SGD's.
  const Tolerance tsums{0.0, 1e-7};  // another backend's double sums in another order, rounded to float
  c.outputs = {{"w_sq", kOneRounding, tsums},
               {"g_sq", kOneRounding, tsums},
               {"w", kUpdateRounding, kExact},
               {"v", kUpdateRounding, kExact}};
  return c;
}

OpCase accumulate_case(int64_t n, uint64_t seed) {
  OpCase c;
  c.name = "accumulate_gradient " + std::to_string(n) + " over 3 micro-batches";
  c.ops = {"accumulate_gradient"};
  c.make_inputs = [=] {
    return NamedTensors{
        {"g1", random_tensor({n}, seed)}, {"g2", random_tensor({n}, seed + 1)}, {"g3", random_tensor({n}, seed + 2)}};
  };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    Tensor sum = nan_on(ctx, {n});
    Tensor g1 = copy_on(ctx, input(in, "g1")), g2 = copy_on(ctx, input(in, "g2")), g3 = copy_on(ctx, input(in, "g3"));
    ops::accumulate_gradient(ctx, ops::AccumulateStage::first, 1.0f / 3.0f, sum, g1);
    ops::accumulate_gradient(ctx, ops::AccumulateStage::middle, 1.0f / 3.0f, sum, g2);
    ops::accumulate_gradient(ctx, ops::AccumulateStage::last, 1.0f / 3.0f, sum, g3);
    ctx.synchronize();
    return NamedTensors{{"mean", to_cpu(g3)}};
  };
  c.reference = [=](const NamedTensors& in) {
    const auto a = values(in, "g1"), b = values(in, "g2"), d = values(in, "g3");
    std::vector<double> mean(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) mean[i] = (a[i] + b[i] + d[i]) / 3.0;
    return NamedValues{{"mean", mean}};
  };
  // Two float additions and a product by the float 1/3: a few ulps of the sum's terms.
  const Tolerance tmean{2e-7, 1e-6};
  c.outputs = {{"mean", tmean, kExact}};
  return c;
}

// unscale_gradients: gradients scaled by 2^16 (plus, in the second case, planted +inf, -inf and
// NaN), divided back by one multiply by 2^-16: exact, so every backend gives the float64
// reference's bits. Non-finite elements are compared as markers (+-2^100 for inf, 2^99 for NaN:
// floats, far from any gradient here), since a NaN equals nothing; their count is an output too.
double nonfinite_marker(double v) {
  if (std::isnan(v)) return std::ldexp(1.0, 99);
  if (std::isinf(v)) return std::ldexp(v > 0 ? 1.0 : -1.0, 100);
  return v;
}

OpCase unscale_case(int64_t n, bool plant_nonfinite, uint64_t seed) {
  OpCase c;
  c.name = "unscale_gradients " + std::to_string(n) + (plant_nonfinite ? " with inf, -inf and NaN" : "");
  c.ops = {"unscale_gradients"};
  c.make_inputs = [=] {
    std::vector<double> g = random_floats(static_cast<std::size_t>(n), seed, -1.0, 1.0);
    for (double& v : g) v *= 65536.0;
    if (plant_nonfinite) {
      g[1] = std::numeric_limits<double>::infinity();
      g[static_cast<std::size_t>(n / 2)] = -std::numeric_limits<double>::infinity();
      g[static_cast<std::size_t>(n - 1)] = std::numeric_limits<double>::quiet_NaN();
    }
    return NamedTensors{{"grad", to_tensor(g, {n})}};
  };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    Tensor g = copy_on(ctx, input(in, "grad"));
    const int64_t count = ops::unscale_gradients(ctx, 1.0f / 65536.0f, g);
    std::vector<double> out = tensor_values(to_cpu(g));
    for (double& v : out) v = nonfinite_marker(v);
    return NamedTensors{{"grad", to_tensor(out, {n})}, {"nonfinite", scalar_f32(static_cast<double>(count))}};
  };
  c.reference = [=](const NamedTensors& in) {
    std::vector<double> g = values(in, "grad");
    double count = 0;
    for (double& v : g) {
      count += std::isfinite(v) ? 0 : 1;
      v = nonfinite_marker(v / 65536.0);
    }
    return NamedValues{{"grad", g}, {"nonfinite", {count}}};
  };
  c.outputs = {{"grad", kExact, kExact}, {"nonfinite", kExact, kExact}};
  return c;
}

// ---- float32 <-> fp16 / bf16 (ops/cast.hpp) -----------------------------------------------------

// A 16-bit format's layout, for a reference written from the IEEE definitions here (not from
// core/half.hpp, which the CPU kernels use): fp16 has 5 exponent and 10 fraction bits, bf16 8 and 7.
struct HalfLayout {
  DType dtype;
  int fraction_bits, exponent_bits;
  const char* name;
  int bias() const { return (1 << (exponent_bits - 1)) - 1; }
  uint32_t exponent_mask() const { return ((1u << exponent_bits) - 1) << fraction_bits; }
  uint32_t fraction_mask() const { return (1u << fraction_bits) - 1; }
  bool is_nan(uint32_t p) const { return (p & exponent_mask()) == exponent_mask() && (p & fraction_mask()) != 0; }
  // A pattern's value: subnormal, normal or infinite (not NaN).
  double value(uint32_t p) const {
    const uint32_t e = (p & exponent_mask()) >> fraction_bits, f = p & fraction_mask();
    const double sign = (p & 0x8000u) != 0 ? -1.0 : 1.0;
    if (e == (exponent_mask() >> fraction_bits)) return sign * std::numeric_limits<double>::infinity();
    if (e == 0) return sign * std::ldexp(static_cast<double>(f), 1 - bias() - fraction_bits);
    return sign *
           std::ldexp(static_cast<double>(f + (1u << fraction_bits)), static_cast<int>(e) - bias() - fraction_bits);
  }
  uint32_t infinity() const { return exponent_mask(); }
  uint32_t largest_finite() const { return exponent_mask() - 1; }
};
constexpr HalfLayout kFp16Layout{DType::f16, 10, 5, "fp16"};
constexpr HalfLayout kBf16Layout{DType::bf16, 7, 8, "bf16"};

// A NaN pattern compared as a marker (its payload is the backend's choice); any other pattern as
// its number.
constexpr double kNanPattern = 65536.0;

// The nearest pattern to v, ties to the even pattern, by search over every non-negative finite
// pattern; beyond the largest finite value by half a unit or more: infinity (the tie there goes
// to the even pattern, which is infinity's).
double nearest_pattern(const HalfLayout& h, double v) {
  if (std::isnan(v)) return kNanPattern;
  const uint32_t sign = std::signbit(v) ? 0x8000u : 0u;
  const double a = std::fabs(v);
  const uint32_t top = h.largest_finite();
  const double max = h.value(top), beyond = max + (max - h.value(top - 1)) / 2;
  if (a >= beyond) return sign | h.infinity();
  uint32_t lo = 0, hi = top;  // the largest pattern whose value is <= a
  while (lo < hi) {
    const uint32_t mid = (lo + hi + 1) / 2;
    if (h.value(mid) <= a)
      lo = mid;
    else
      hi = mid - 1;
  }
  uint32_t best = lo;
  if (lo < top) {
    const double below = a - h.value(lo), above = h.value(lo + 1) - a;
    if (above < below || (above == below && (lo + 1) % 2 == 0)) best = lo + 1;
  }
  return sign | best;
}

// A 16-bit tensor's patterns as numbers, NaN patterns as the marker.
std::vector<double> patterns_of(const HalfLayout& h, const Tensor& t) {
  const uint16_t* p = static_cast<const uint16_t*>(t.raw());
  std::vector<double> out(static_cast<std::size_t>(t.numel()));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = h.is_nan(p[i]) ? kNanPattern : p[i];
  return out;
}

// Inputs for cast_to_half: random values at every scale the format holds and beyond, then every
// rounding boundary that matters: exact midpoints between neighbours (ties, to even) and the
// floats just either side, around 1, in the subnormals, at the smallest subnormal's half, at the
// overflow boundary; zeros, infinities and NaN.
std::vector<double> cast_inputs(const HalfLayout& h, uint64_t seed) {
  std::vector<double> v;
  Rng rng(seed);
  for (int i = 0; i < 3000; ++i) {
    const double mantissa = rng.uniform() * 2.0 - 1.0;
    const int exponent =
        static_cast<int>(rng.uniform() * 2 * (h.bias() + h.fraction_bits + 4)) - (h.bias() + h.fraction_bits + 4);
    v.push_back(static_cast<float>(std::ldexp(mantissa, exponent)));
  }
  const uint32_t top = h.largest_finite();
  for (uint32_t p : {0u, 1u, 2u, 3u, (1u << h.fraction_bits) - 1, 1u << h.fraction_bits,
                     static_cast<uint32_t>(h.bias()) << h.fraction_bits,
                     (static_cast<uint32_t>(h.bias()) << h.fraction_bits) + 1, top - 2, top - 1}) {
    const double mid = (h.value(p) + h.value(p + 1)) / 2;  // a tie: exact in float32
    for (double x : {mid, static_cast<double>(std::nextafter(static_cast<float>(mid), 0.0f)),
                     static_cast<double>(std::nextafter(static_cast<float>(mid), INFINITY)), h.value(p)}) {
      v.push_back(x);
      v.push_back(-x);
    }
  }
  const double max = h.value(top), beyond = max + (max - h.value(top - 1)) / 2;
  for (double x : {beyond, static_cast<double>(std::nextafter(static_cast<float>(beyond), 0.0f)), max * 4,
                   h.value(1) / 2, h.value(1) / 4, 0.75 * h.value(1), std::numeric_limits<double>::infinity(), 0.0})
    for (double s : {1.0, -1.0}) v.push_back(s * x);
  v.push_back(std::numeric_limits<double>::quiet_NaN());
  return v;
}

OpCase cast_to_half_case(const HalfLayout& h, uint64_t seed) {
  OpCase c;
  c.name = std::string("cast_to_half ") + h.name + " (ties, subnormals, overflow, inf, NaN)";
  c.ops = {"cast_to_half"};
  const std::vector<double> x = cast_inputs(h, seed);
  const int64_t n = static_cast<int64_t>(x.size());
  c.make_inputs = [=] { return NamedTensors{{"x", to_tensor(x, {n})}}; };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    Tensor y_host = Tensor::empty({n}, h.dtype);
    std::memset(y_host.raw(), 0xff, y_host.bytes());  // NaN patterns: an element left unwritten fails
    Tensor y = y_host.to(ctx.device());
    ops::cast_to_half(ctx, on(ctx, input(in, "x")), y);
    ctx.synchronize();
    return NamedTensors{{"y", to_tensor(patterns_of(h, to_cpu(y)), {n})}};
  };
  c.reference = [=](const NamedTensors& in) {
    std::vector<double> want;
    for (double v : values(in, "x")) want.push_back(nearest_pattern(h, v));
    return NamedValues{{"y", want}};
  };
  c.outputs = {{"y", kExact, kExact}};  // bit patterns
  return c;
}

// round_to_half (the dispatch's rounding of 16-bit outputs under a mixed precision) on
// cast_to_half's inputs, in place: each element becomes the value of its nearest pattern, exactly;
// infinities and NaN as markers.
OpCase round_to_half_case(const HalfLayout& h, uint64_t seed) {
  OpCase c;
  c.name = std::string("round_to_half ") + h.name + " in place (ties, subnormals, overflow, inf, NaN)";
  c.ops = {"round_to_half"};
  const std::vector<double> x = cast_inputs(h, seed);
  const int64_t n = static_cast<int64_t>(x.size());
  const HalfFormat format = h.dtype == DType::f16 ? HalfFormat::fp16 : HalfFormat::bf16;
  c.make_inputs = [=] { return NamedTensors{{"x", to_tensor(x, {n})}}; };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    Tensor y = input(in, "x").to(ctx.device()).clone();  // a copy of its own: the input stays as made
    ops::round_to_half(ctx, y, format);
    ctx.synchronize();
    std::vector<double> out = tensor_values(to_cpu(y));
    for (double& v : out) v = nonfinite_marker(v);
    return NamedTensors{{"y", to_tensor(out, {n})}};
  };
  c.reference = [=](const NamedTensors& in) {
    std::vector<double> want;
    for (double v : values(in, "x")) {
      const double p = nearest_pattern(h, v);
      want.push_back(nonfinite_marker(p == kNanPattern ? std::numeric_limits<double>::quiet_NaN()
                                                       : h.value(static_cast<uint32_t>(p))));
    }
    return NamedValues{{"y", want}};
  };
  c.outputs = {{"y", kExact, kExact}};
  return c;
}

// Every one of the 65,536 patterns of the format back to float32: exact, infinities and NaN as
// markers.
OpCase cast_from_half_case(const HalfLayout& h) {
  OpCase c;
  c.name = std::string("cast_from_half ") + h.name + " (all 65536 patterns)";
  c.ops = {"cast_from_half"};
  constexpr int64_t n = 65536;
  c.make_inputs = [=] {
    Tensor x = Tensor::empty({n}, h.dtype);
    uint16_t* p = static_cast<uint16_t*>(x.raw());
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<uint16_t>(i);
    return NamedTensors{{"x", x}};
  };
  c.run = [=](Context& ctx, const NamedTensors& in) {
    Tensor y = nan_on(ctx, {n});
    ops::cast_from_half(ctx, on(ctx, input(in, "x")), y);
    ctx.synchronize();
    std::vector<double> out = tensor_values(to_cpu(y));
    for (double& v : out) v = nonfinite_marker(v);
    return NamedTensors{{"y", to_tensor(out, {n})}};
  };
  c.reference = [=](const NamedTensors& in) {
    const uint16_t* p = static_cast<const uint16_t*>(input(in, "x").raw());
    std::vector<double> want;
    for (int64_t i = 0; i < n; ++i)
      want.push_back(nonfinite_marker(h.is_nan(p[i]) ? std::numeric_limits<double>::quiet_NaN() : h.value(p[i])));
    return NamedValues{{"y", want}};
  };
  c.outputs = {{"y", kExact, kExact}};
  return c;
}

std::vector<OpCase> build_cases() {
  std::vector<OpCase> cases;
  uint64_t seed = 1000;
  auto next_seed = [&seed] { return seed += 100; };
  // conv2d: {n, h, w, c, o, k, stride, padding}.
  for (const ConvShape& s : std::vector<ConvShape>{
           {1, 15, 15, 3, 13, 7, 2, 3},   // ResNet-50 stem (7x7 stride 2 padding 3 on RGB), N = 1
           {2, 9, 11, 3, 8, 7, 1, 3},     // 7x7 stride 1, non-square input
           {2, 9, 9, 17, 13, 3, 1, 1},    // 3x3 same padding, odd channels
           {1, 10, 9, 13, 17, 3, 2, 1},   // 3x3 stride 2 (ResNet-50 stage transition), odd size
           {2, 8, 8, 13, 5, 3, 2, 0},     // stride 2 without padding: the last row/column unused
           {2, 7, 7, 64, 16, 1, 1, 0},    // bottleneck 1x1 reduce, 7x7 like stage 5
           {2, 7, 7, 16, 16, 3, 1, 1},    // bottleneck 3x3
           {1, 7, 7, 16, 67, 1, 1, 0},    // bottleneck 1x1 expand to an odd count
           {2, 9, 9, 17, 24, 1, 2, 0},    // 1x1 stride 2 projection shortcut
           {1, 5, 6, 1, 3, 3, 1, 2},      // one input channel, padding wider than needed
           {3, 7, 9, 5, 4, 3, 1, 1},      // N = 3, odd sizes
           {3, 7, 9, 5, 7, 3, 1, 0},      // valid convolution
           {3, 10, 10, 1, 16, 3, 1, 1},   // ResNet-20's stem on one-channel images
           {2, 14, 14, 16, 32, 3, 2, 1},  // ResNet-20's stage transition
           {2, 7, 7, 64, 64, 3, 1, 1},    // ResNet-20's last stage
           {2, 5, 6, 3, 2, 1, 1, 1, 3},   // a 1x3 kernel: not square
       })
    cases.push_back(conv2d_case(s, next_seed()));
  // batch norm: N = 1, odd channels, a large mean (post-ReLU activations are not centred), 2-D.
  cases.push_back(batch_norm_training_case({1, 7, 7, 13}, 0.0, 1.0, next_seed()));
  cases.push_back(batch_norm_training_case({2, 5, 5, 17}, 0.0, 1.0, next_seed()));
  cases.push_back(batch_norm_training_case({2, 7, 7, 64}, 3.0, 0.5, next_seed()));
  cases.push_back(batch_norm_training_case({6, 13}, 0.0, 1.0, next_seed()));
  cases.push_back(batch_norm_inference_case({1, 7, 7, 13}, next_seed()));
  cases.push_back(batch_norm_inference_case({3, 4, 5, 67}, next_seed()));
  cases.push_back(relu_case({1, 7, 7, 13}, false, next_seed()));
  cases.push_back(relu_case({2, 5, 5, 17}, true, next_seed()));
  cases.push_back(relu_case({3, 1000}, false, next_seed()));
  cases.push_back(add_case({1, 7, 7, 13}, next_seed()));
  cases.push_back(add_case({2, 4, 4, 67}, next_seed()));
  // max pool: PyTorch's ResNet pool (3, 2, 1) on odd and even sizes, a 2x2 pool that drops the
  // last row and column, a stride-1 pool whose windows overlap most.
  cases.push_back(max_pool_case({1, 9, 9, 13, 3, 2, 1}, next_seed()));
  cases.push_back(max_pool_case({2, 16, 16, 17, 3, 2, 1}, next_seed()));
  cases.push_back(max_pool_case({2, 7, 7, 3, 2, 2, 0}, next_seed()));
  cases.push_back(max_pool_case({1, 5, 6, 8, 3, 1, 1}, next_seed()));
  cases.push_back(global_avg_pool_case({1, 7, 7, 13}, next_seed()));
  cases.push_back(global_avg_pool_case({2, 7, 7, 67}, next_seed()));
  cases.push_back(global_avg_pool_case({3, 1, 1, 17}, next_seed()));
  cases.push_back(linear_case(1, 13, 17, true, next_seed()));
  cases.push_back(linear_case(3, 256, 1000, true, next_seed()));  // ResNet-50's head, narrowed
  cases.push_back(linear_case(5, 67, 10, false, next_seed()));
  cases.push_back(softmax_cross_entropy_case(1, 10, 0.0, 1.0, next_seed()));
  cases.push_back(softmax_cross_entropy_case(5, 1000, 0.1, 1.0, next_seed()));
  cases.push_back(softmax_cross_entropy_case(7, 13, 0.1, 20.0, next_seed()));
  cases.push_back(count_correct_case(1, 10, false, next_seed()));
  cases.push_back(count_correct_case(9, 1000, false, next_seed()));
  cases.push_back(count_correct_case(64, 13, true, next_seed()));
  cases.push_back(normalize_images_case({1, 9, 7, 3}, next_seed()));
  cases.push_back(normalize_images_case({2, 5, 5, 1}, next_seed()));
  cases.push_back(normalize_images_case({3, 4, 3, 4}, next_seed()));
  // Large tensors: above 65,535 blocks of 256 threads (16,777,216 elements) a CUDA kernel's grid
  // is capped (blocks_for) and each thread loops; indices pass 2^24, where float arithmetic on an
  // index would go wrong. Batch norm's 2-D rows (1,000,000) are above cuDNN's limit on N (about
  // 65,535 in inference, 880,801 in training), which the (1, C, M, 1) descriptor keeps out of N.
  cases.push_back(relu_case({2, 1024, 1024, 9}, false, next_seed()));
  cases.push_back(add_case({2, 1024, 1024, 9}, next_seed()));
  cases.push_back(max_pool_case({4, 128, 128, 272, 3, 2, 1}, next_seed()));
  cases.push_back(global_avg_pool_case({32, 32, 32, 544}, next_seed()));
  cases.push_back(softmax_cross_entropy_case(17000, 1024, 0.1, 1.0, next_seed()));
  cases.push_back(count_correct_case(17000, 1024, false, next_seed()));
  cases.push_back(normalize_images_case({120, 224, 224, 3}, next_seed()));
  cases.push_back(batch_norm_training_case({1000000, 17}, 0.0, 1.0, next_seed()));
  cases.push_back(batch_norm_inference_case({1000000, 17}, next_seed()));
  // NCF's ops: tables with repeated ids, odd widths, (N) and (N, 1) logits, saturated logits.
  cases.push_back(embedding_case(11, 7, 40, next_seed()));
  cases.push_back(embedding_case(300, 64, 1000, next_seed()));
  cases.push_back(concat_case(5, 3, 13, next_seed()));
  cases.push_back(concat_case(64, 64, 64, next_seed()));
  cases.push_back(multiply_case({5, 13}, next_seed()));
  cases.push_back(multiply_case({64, 64}, next_seed()));
  cases.push_back(sigmoid_bce_case({37}, 1.0, next_seed()));
  cases.push_back(sigmoid_bce_case({64, 1}, 30.0, next_seed()));
  // Optimizer updates and accumulation, odd sizes and one past the CPU kernels' threading bound.
  cases.push_back(sgd_update_case(1001, false, next_seed()));
  cases.push_back(sgd_update_case(40000, true, next_seed()));
  cases.push_back(adam_update_case(1001, 1, next_seed()));
  cases.push_back(adam_update_case(40000, 37, next_seed()));
  cases.push_back(lazy_adam_update_case(30, 7, 1, next_seed()));      // narrower than a warp
  cases.push_back(lazy_adam_update_case(1000, 64, 12, next_seed()));  // NCF's widths, many blocks
  cases.push_back(lazy_adam_update_case(9, 600, 3, next_seed()));     // wider than a block
  cases.push_back(lars_case(5017, next_seed()));
  cases.push_back(lars_case(45017, next_seed()));
  cases.push_back(accumulate_case(1001, next_seed()));
  cases.push_back(accumulate_case(40000, next_seed()));
  // More shapes, after the rest so that the cases above keep their seeds (the max pools' windows
  // have no near ties for the finite differences):
  cases.push_back(relu_case({3, 5, 7, 3}, false, next_seed(), true));   // inputs exactly at the kink
  cases.push_back(max_pool_case({2, 9, 8, 5, 3, 3, 0}, next_seed()));   // kernel = stride 3: the last column unused
  cases.push_back(max_pool_case({2, 6, 6, 3, 4, 2, 2}, next_seed()));   // even kernel, padding half of it
  cases.push_back(max_pool_case({1, 3, 3, 2, 1, 1, 0}, next_seed()));   // 1x1: a copy
  cases.push_back(global_avg_pool_case({1, 8, 8, 1}, next_seed()));     // one channel
  cases.push_back(global_avg_pool_case({2, 7, 7, 2048}, next_seed()));  // ResNet-50's head
  cases.push_back(batch_norm_training_case({4, 3, 5, 1}, 0.0, 1.0, next_seed()));  // one channel
  cases.push_back(linear_case(1, 1, 1, true, next_seed()));                        // every dimension 1
  cases.push_back(linear_case(8, 2048, 100, true, next_seed()));  // a long reduction: 2048 inputs, as ResNet-50's head
  cases.push_back(normalize_images_case({1, 1, 1, 1}, next_seed()));  // one pixel
  cases.push_back(embedding_case(1, 3, 9, next_seed()));              // one row: every id the same
  cases.push_back(concat_case(1, 1, 1, next_seed()));                 // one sample, width-1 sides
  cases.push_back(concat_case(13, 1, 64, next_seed()));               // a width-1 side next to a wide one
  // Above the CPU kernels' threading bound (1 << 15 elements).
  cases.push_back(concat_case(4099, 64, 128, next_seed()));
  cases.push_back(multiply_case({4099, 64}, next_seed()));
  // Pooling for AlexNet, GoogLeNet and Inception-v3 (issue 24): {n, h, w, c, kernel, stride,
  // padding, ceil_mode, count_include_pad}; adaptive {n, h, w, c, oh, ow}.
  cases.push_back(avg_pool_case({2, 7, 7, 5, 3, 1, 1, false, true}, next_seed()));    // Inception's branch pool
  cases.push_back(avg_pool_case({2, 7, 7, 5, 3, 1, 1, false, false}, next_seed()));   // the same, excluding pad
  cases.push_back(avg_pool_case({1, 17, 17, 6, 5, 3, 0, false, true}, next_seed()));  // Inception's aux head
  cases.push_back(avg_pool_case({2, 13, 13, 3, 5, 3, 0, true, true}, next_seed()));   // ceil: the last window overhangs
  cases.push_back(avg_pool_case({2, 8, 8, 3, 3, 2, 1, true, true}, next_seed()));   // ceil overhang beyond the padding
  cases.push_back(avg_pool_case({1, 8, 8, 3, 3, 2, 1, true, false}, next_seed()));  // the same, excluding pad
  cases.push_back(max_pool_case({1, 112, 112, 3, 3, 2, 0, true}, next_seed()));     // GoogLeNet's first pool
  cases.push_back(max_pool_case({2, 8, 8, 5, 3, 2, 0, true}, next_seed()));         // 8 -> 4: the last window overhangs
  cases.push_back(max_pool_case({2, 15, 15, 4, 2, 2, 0, true}, next_seed()));       // 15 -> 8: a 1x1 corner window
  cases.push_back(max_pool_case({1, 6, 7, 3, 3, 1, 1, true}, next_seed()));         // ceil changes nothing here
  cases.push_back(adaptive_avg_pool_case({2, 13, 13, 5, 6, 6}, next_seed()));       // AlexNet: overlapping windows
  cases.push_back(adaptive_avg_pool_case({2, 5, 5, 3, 6, 6}, next_seed()));         // more outputs than inputs
  cases.push_back(adaptive_avg_pool_case({2, 1, 1, 7, 6, 6}, next_seed()));         // AlexNet below 96 px: a copy
  cases.push_back(adaptive_avg_pool_case({2, 14, 14, 3, 4, 4}, next_seed()));       // 14 % 4 != 0
  cases.push_back(adaptive_avg_pool_case({2, 8, 8, 9, 1, 1}, next_seed()));         // global, as GoogLeNet's head
  cases.push_back(adaptive_avg_pool_case({1, 9, 6, 4, 4, 5}, next_seed()));         // not square
  // An auxiliary head's loss, weighted as GoogLeNet's (0.3) and Inception-v3's (0.4) are, and a
  // head that is off (weight 0: a zero gradient).
  cases.push_back(softmax_cross_entropy_case(4, 10, 0.1, 1.0, next_seed(), 0.3));
  cases.push_back(softmax_cross_entropy_case(3, 1000, 0.0, 1.0, next_seed(), 0.4));
  cases.push_back(softmax_cross_entropy_case(2, 7, 0.0, 1.0, next_seed(), 0.0));
  // conv2d generalised (AlexNet, GoogLeNet, Inception-v3 and their Caffe versions): bias, groups,
  // rectangular kernels, a stride and a padding per dimension.
  {
    using D = RefConv2dDims;
    // {n, h, w, c, o, kh, kw, stride_h, stride_w, pad_top, pad_bottom, pad_left, pad_right, groups}
    cases.push_back(conv2d_case(D::square(2, 19, 19, 3, 8, 11, 11, 4, 2), true, next_seed()));   // AlexNet conv1
    cases.push_back(conv2d_case(D::square(2, 7, 7, 6, 8, 5, 5, 1, 2, 2), true, next_seed()));    // Caffe conv2
    cases.push_back(conv2d_case(D::square(2, 6, 5, 8, 6, 3, 3, 1, 1, 2), true, next_seed()));    // Caffe conv4/5
    cases.push_back(conv2d_case(D{2, 5, 9, 5, 6, 1, 7, 1, 1, 0, 0, 3, 3}, false, next_seed()));  // Inception C 1x7
    cases.push_back(conv2d_case(D{2, 9, 5, 5, 6, 7, 1, 1, 1, 3, 3, 0, 0}, false, next_seed()));  // Inception C 7x1
    cases.push_back(conv2d_case(D{2, 4, 6, 7, 5, 1, 3, 1, 1, 0, 0, 1, 1}, false, next_seed()));  // Inception E 1x3
    cases.push_back(conv2d_case(D{2, 6, 4, 7, 5, 3, 1, 1, 1, 1, 1, 0, 0}, false, next_seed()));  // Inception E 3x1
    cases.push_back(conv2d_case(D::square(2, 9, 11, 5, 7, 3, 3, 2, 0), false, next_seed()));  // Inception B, odd size
    // Every side padded differently and the strides unequal: the CPU kernel (oneDNN) takes it,
    // cuDNN pads both sides of a dimension equally only.
    cases.push_back(conv2d_case(D{2, 7, 8, 4, 5, 3, 3, 2, 1, 1, 0, 2, 1}, true, next_seed(),
                                "cuDNN pads both sides of a dimension equally"));
    // Depthwise (groups = C) with a channel multiplier of 2 and unequal strides.
    cases.push_back(conv2d_case(D{2, 7, 9, 6, 12, 3, 3, 1, 2, 1, 1, 1, 1, 6}, true, next_seed()));
    // The fused bias and ReLU (--fuse conv-bias-relu) on AlexNet's conv1 and a grouped Caffe 3x3.
    cases.push_back(conv2d_bias_relu_case(D::square(2, 19, 19, 3, 8, 11, 11, 4, 2), next_seed()));
    cases.push_back(conv2d_bias_relu_case(D::square(2, 6, 5, 8, 6, 3, 3, 1, 1, 2), next_seed()));
    // The fused convolution with batch norms' prologue and statistics (issue 26, section 3), with
    // and without the prologue: ResNet's 1x1 and 3x3 shapes, a strided one, channels of 8 and 16
    // (what cuDNN's fused engines want) and odd ones (the steps apart).
    cases.push_back(conv2d_bn_stats_case(D::square(2, 6, 6, 8, 16, 1, 1, 1, 0), true, next_seed()));
    cases.push_back(conv2d_bn_stats_case(D::square(2, 6, 6, 16, 8, 3, 3, 1, 1), true, next_seed()));
    cases.push_back(conv2d_bn_stats_case(D::square(2, 7, 7, 8, 8, 3, 3, 2, 1), true, next_seed()));
    cases.push_back(conv2d_bn_stats_case(D::square(2, 6, 6, 8, 16, 1, 1, 1, 0), false, next_seed()));
    cases.push_back(conv2d_bn_stats_case(D::square(1, 5, 5, 3, 5, 3, 3, 1, 1), true, next_seed()));
  }
  // Issue 24 (AlexNet, GoogLeNet): LRN across channels, N-way channel concatenation, NCHW flatten.
  // LRN with AlexNet's and GoogLeNet's parameters at their activations' scale: a window wider than
  // C, conv2's 96 channels, raw-pixel-like values; then size 3 with k = 2 on 2-D features, size 1
  // (which the CPU computes without oneDNN); then AlexNet's norm1 at full size (N = 2), above the
  // CPU threading and with 580,800 elements.
  const ops::LrnParams alexnet_lrn{5, 1e-4f, 0.75f, 1.0f};
  cases.push_back(lrn_case({2, 3, 3, 3}, alexnet_lrn, 100.0, false, next_seed()));
  cases.push_back(lrn_case({2, 3, 2, 96}, alexnet_lrn, 100.0, false, next_seed()));
  cases.push_back(lrn_case({2, 2, 2, 7}, alexnet_lrn, 255.0, true, next_seed()));
  cases.push_back(lrn_case({6, 10}, ops::LrnParams{3, 0.5f, 0.75f, 2.0f}, 1.0, false, next_seed()));
  cases.push_back(lrn_case({2, 3, 5}, ops::LrnParams{1, 0.5f, 0.75f, 2.0f}, 2.0, false, next_seed()));  // element-wise
  cases.push_back(lrn_case({2, 55, 55, 96}, alexnet_lrn, 100.0, true, next_seed()));
  // Inception 3a's four branches (64 + 128 + 32 + 32) at 3x3, two one-channel inputs, one input (a
  // copy), 2-D features, and Inception-v3 Mixed_6's 4 x 192 at 17x17 (above the threading bound).
  cases.push_back(concat_channels_case({2, 3, 3}, {64, 128, 32, 32}, next_seed()));
  cases.push_back(concat_channels_case({3, 4, 5}, {1, 1}, next_seed()));
  cases.push_back(concat_channels_case({2, 3, 3}, {7}, next_seed()));
  cases.push_back(concat_channels_case({5}, {3, 13, 1}, next_seed()));
  cases.push_back(concat_channels_case({2, 17, 17}, {192, 192, 192, 192}, next_seed()));
  // 1x1 (a copy), Caffe AlexNet's pool5 narrowed to 16 channels, odd sizes with N = 3.
  cases.push_back(flatten_chw_case({4, 1, 1, 16}, next_seed()));
  cases.push_back(flatten_chw_case({2, 6, 6, 16}, next_seed()));
  cases.push_back(flatten_chw_case({3, 4, 4, 5}, next_seed()));
  // Dropout: sizes that are not multiples of 4 (the last Philox block is short), one element, a
  // tensor above the CPU kernel's threading bound, positions with high words set, and p = 0 (a copy).
  cases.push_back(dropout_case({1, 7, 7, 13}, 0.5, 0, next_seed()));
  cases.push_back(dropout_case({2, 5, 5, 17}, 0.1, 123, next_seed()));
  cases.push_back(dropout_case({3, 1000}, 0.7, (uint64_t{5} << 32) | 7, next_seed()));
  cases.push_back(dropout_case({4099, 9}, 0.5, ~uint64_t{0}, next_seed()));
  cases.push_back(dropout_case({1}, 0.5, 2, next_seed()));
  cases.push_back(dropout_case({2, 3, 5}, 0.0, 9, next_seed()));
  cases.push_back(dropout_case({64, 4096}, 0.1, (uint64_t{17} << 32) | (uint64_t{2} << 16) | 3, next_seed()));
  // Caffe's input (--preprocess caffe): RGB pixels to BGR channels, with ImageNet's and with
  // Caffe's mean; 1 and 4 channels; one past the CPU kernel's threading bound.
  const auto reversed = ops::ChannelOrder::reversed;
  cases.push_back(normalize_images_case({2, 5, 7, 3}, next_seed(), reversed));
  cases.push_back(normalize_images_case({2, 9, 5, 3}, next_seed(), reversed, /*caffe_mean=*/true));
  cases.push_back(normalize_images_case({2, 3, 3, 1}, next_seed(), reversed));
  cases.push_back(normalize_images_case({3, 4, 3, 4}, next_seed(), reversed));
  cases.push_back(normalize_images_case({1, 151, 151, 3}, next_seed(), reversed, /*caffe_mean=*/true));
  // Issue 25 (the Transformer): layer norm over rows of tokens. A few short rows; (batch, length,
  // width) with width 64; one value per row (y = beta, no gradient to x); a row wider than a CUDA
  // block (1,000, not a multiple of 256) with a mean 20 times its spread; one row; and
  // transformer-base's width for 300 tokens (above the CPU threading bound).
  cases.push_back(layer_norm_case({6, 13}, 0.0, 1.0, next_seed()));
  cases.push_back(layer_norm_case({2, 5, 64}, 0.0, 2.0, next_seed()));
  cases.push_back(layer_norm_case({3, 1}, 0.0, 1.0, next_seed()));
  cases.push_back(layer_norm_case({4, 1000}, 10.0, 0.5, next_seed()));
  cases.push_back(layer_norm_case({1, 517}, 0.0, 1.0, next_seed()));
  cases.push_back(layer_norm_case({300, 512}, 0.0, 1.0, next_seed()));
  // Attention scores: padding masks alone and with the causal mask, one key, queries fewer than
  // keys (encoder-decoder attention), scores that overflow without the maximum subtracted, a row
  // wider than a CUDA block, and transformer-base's 8 heads over 2 x 64 x 64 (above the CPU
  // threading bound).
  cases.push_back(masked_softmax_case({3, 2, 5, 5}, false, 3.0, next_seed()));
  cases.push_back(masked_softmax_case({3, 2, 5, 5}, true, 3.0, next_seed()));
  cases.push_back(masked_softmax_case({2, 1, 3, 1}, true, 1.0, next_seed()));
  cases.push_back(masked_softmax_case({4, 3, 2, 7}, false, 20.0, next_seed()));
  cases.push_back(masked_softmax_case({2, 1, 2, 300}, false, 5.0, next_seed()));
  cases.push_back(masked_softmax_case({2, 8, 64, 64}, true, 4.0, next_seed()));
  // Attention's products: every transpose combination (scores Q K^T with 1/sqrt(d); P V; their
  // gradients inside each case), one-row and one-column shapes, K = 1 and 0, and transformer-base's 8
  // heads x 2 sequences of 64 tokens at d = 64 (above oneDNN's and cuBLAS's small-matrix paths).
  using MD = RefMatmulDims;
  cases.push_back(batched_matmul_case(MD{3, 4, 5, 6, false, false}, 1.0f, next_seed()));
  cases.push_back(batched_matmul_case(MD{3, 4, 5, 6, false, true}, 0.125f, next_seed()));
  cases.push_back(batched_matmul_case(MD{2, 5, 3, 4, true, false}, 1.0f, next_seed()));
  cases.push_back(batched_matmul_case(MD{2, 5, 3, 4, true, true}, -0.5f, next_seed()));
  cases.push_back(batched_matmul_case(MD{1, 1, 7, 1, false, true}, 1.0f, next_seed()));
  cases.push_back(batched_matmul_case(MD{4, 6, 1, 3, false, false}, 2.0f, next_seed()));
  cases.push_back(batched_matmul_case(MD{2, 3, 0, 4, false, true}, 1.0f, next_seed()));  // K = 0: c = 0
  cases.push_back(batched_matmul_case(MD{16, 64, 64, 64, false, true}, 0.125f, next_seed()));
  // The token loss: the reference's smoothing 0.1 and none, a normaliser above the call's tokens (the
  // global batch), a vocabulary wider than a warp's stride many times over.
  cases.push_back(token_cross_entropy_case(9, 7, 0.1, 6.0, next_seed()));
  cases.push_back(token_cross_entropy_case(12, 11, 0.0, 40.0, next_seed()));
  cases.push_back(token_cross_entropy_case(30, 4099, 0.1, 100.0, next_seed()));
  // The heads' transpose: a Transformer's (N, L, H, 64), single-element axes, an odd shape.
  cases.push_back(swap_middle_axes_case({2, 7, 8, 64}, next_seed()));
  cases.push_back(swap_middle_axes_case({1, 1, 3, 5}, next_seed()));
  cases.push_back(swap_middle_axes_case({3, 5, 1, 2}, next_seed()));
  cases.push_back(swap_middle_axes_case({2, 3, 4, 1}, next_seed()));
  // The embedding's scale and positions: the base model's sqrt(512), more positions than tokens.
  cases.push_back(token_embedding_case(3, 7, 16, 9, 22.627417f, next_seed()));
  cases.push_back(token_embedding_case(1, 1, 1, 1, 1.0f, next_seed()));
  // Loss scaling (appended last: the seeds of the cases above stay as they were).
  cases.push_back(unscale_case(1001, false, next_seed()));
  cases.push_back(unscale_case(40000, true, next_seed()));
  // 16-bit conversions (appended last, as above).
  cases.push_back(cast_to_half_case(kFp16Layout, next_seed()));
  cases.push_back(cast_to_half_case(kBf16Layout, next_seed()));
  cases.push_back(cast_from_half_case(kFp16Layout));
  cases.push_back(cast_from_half_case(kBf16Layout));
  cases.push_back(round_to_half_case(kFp16Layout, next_seed()));
  cases.push_back(round_to_half_case(kBf16Layout, next_seed()));
  // Batch norm + add + ReLU fused (--fuse bn-add-relu; appended last, as above).
  cases.push_back(batch_norm_add_relu_case({4, 3, 3, 8}, next_seed()));
  cases.push_back(batch_norm_add_relu_case({2, 5, 5, 32}, next_seed()));
  // Batch norm + ReLU fused (--fuse bn-relu; appended last, as above).
  cases.push_back(batch_norm_relu_case({4, 3, 3, 8}, next_seed()));
  cases.push_back(batch_norm_relu_case({2, 5, 5, 32}, next_seed()));
  // A residual block's input gradient summed into its shortcut's (appended last, as above):
  // ResNet-50's first 1x1 of a block, ResNet-20's stage transition (3x3, stride 2), odd channels.
  cases.push_back(conv2d_backward_data_add_case(RefConv2dDims::square(2, 7, 7, 32, 16, 1, 1, 1, 0), next_seed()));
  cases.push_back(conv2d_backward_data_add_case(RefConv2dDims::square(2, 14, 14, 16, 32, 3, 3, 2, 1), next_seed()));
  cases.push_back(conv2d_backward_data_add_case(RefConv2dDims::square(1, 5, 6, 5, 7, 3, 3, 1, 1), next_seed()));
  return cases;
}

const OutputTolerance* find_tolerance(const OpCase& c, const std::string& output) {
  for (const auto& t : c.outputs)
    if (t.output == output) return &t;
  return nullptr;
}

const Tensor* find_tensor(const NamedTensors& tensors, const std::string& name) {
  for (const auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

OutputCheck failed(const std::string& output, const std::string& why) {
  OutputCheck check;
  check.output = output;
  check.ok = false;
  check.ratio = std::numeric_limits<double>::infinity();
  check.detail = why;
  return check;
}

std::string format(double v) {
  std::ostringstream os;
  os.precision(3);
  os << v;
  return os.str();
}

}  // namespace

const std::vector<OpCase>& op_cases() {
  static const std::vector<OpCase> cases = build_cases();
  return cases;
}

std::vector<double> tensor_values(const Tensor& t) {
  const auto n = static_cast<std::size_t>(t.numel());
  switch (t.dtype()) {
    case DType::f32: {
      const float* p = t.data<float>();
      return std::vector<double>(p, p + n);
    }
    case DType::i32: {
      const int32_t* p = t.data<int32_t>();
      return std::vector<double>(p, p + n);
    }
    case DType::i64: {
      const int64_t* p = t.data<int64_t>();
      return std::vector<double>(p, p + n);
    }
    case DType::u8: {
      const uint8_t* p = t.data<uint8_t>();
      return std::vector<double>(p, p + n);
    }
    default:
      ST_THROW("tensor_values: no host values for dtype " << dtype_name(t.dtype()));
  }
}

OutputCheck compare_values(const std::string& output, const std::vector<double>& got, const std::vector<double>& want,
                           const Tolerance& tolerance) {
  OutputCheck check;
  check.output = output;
  check.tolerance = tolerance;
  if (got.size() != want.size()) {
    OutputCheck wrong = failed(output, std::to_string(got.size()) + " values, expected " + std::to_string(want.size()));
    wrong.tolerance = tolerance;
    return wrong;
  }
  std::size_t worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double diff = std::fabs(got[i] - want[i]);
    const double allowed = tolerance.abs + tolerance.rel * std::fabs(want[i]);
    double ratio = 0.0;
    if (std::isnan(diff)) {
      ratio = INFINITY;  // NaN never passes
    } else if (diff > 0.0) {
      ratio = allowed > 0.0 ? diff / allowed : INFINITY;
    }
    check.max_abs = std::max(check.max_abs, std::isnan(diff) ? INFINITY : diff);
    if (want[i] != 0.0)
      check.max_rel = std::max(check.max_rel, std::isnan(diff) ? INFINITY : diff / std::fabs(want[i]));
    if (i == 0 || ratio > check.ratio) {
      check.ratio = ratio;
      worst = i;
    }
  }
  check.ok = check.ratio <= 1.0;
  if (check.max_abs == 0.0 && check.ok) {
    check.detail = "identical";
  } else if (!got.empty()) {
    std::ostringstream os;
    os.precision(9);
    os << "worst element " << worst << " of " << got.size() << ": " << got[worst] << " vs " << want[worst];
    check.detail = os.str();
  }
  return check;
}

std::vector<OutputCheck> compare_with_reference(const OpCase& c, const NamedTensors& got, const NamedValues& want) {
  std::vector<OutputCheck> checks;
  for (const auto& [name, values] : want) {
    const OutputTolerance* t = find_tolerance(c, name);
    const Tensor* tensor = find_tensor(got, name);
    if (t == nullptr || !t->reference) {
      checks.push_back(failed(name, "the reference gives it but the case has no reference tolerance for it"));
    } else if (tensor == nullptr) {
      checks.push_back(failed(name, "not among the outputs of run()"));
    } else {
      checks.push_back(compare_values(name, tensor_values(*tensor), values, *t->reference));
    }
  }
  for (const auto& t : c.outputs) {
    const bool in_reference = std::any_of(want.begin(), want.end(), [&](const auto& w) { return w.first == t.output; });
    if (t.reference && !in_reference)
      checks.push_back(failed(t.output, "has a reference tolerance but reference() does not give it"));
  }
  return checks;
}

double amp_unit_of(Precision precision) {
  switch (precision) {
    case Precision::amp_fp16:
      return std::ldexp(1.0, -10);
    case Precision::amp_bf16:
      return std::ldexp(1.0, -7);
    default:
      return 0.0;
  }
}

void round_inputs_to(Precision precision, NamedTensors& inputs) {
  const std::optional<HalfFormat> format = storage_format(precision);
  if (!format) return;
  for (auto& [name, t] : inputs)
    if (t.dtype() == DType::f32) {
      t = t.clone();  // the case's made inputs may be shared
      round_in_place(*format, t.data<float>(), t.numel());
    }
}

namespace {

// The tolerance widened by kAmpBackendUnits units at want's largest magnitude (the markers of
// non-finite values, 2^99 and beyond, left out); an exact tolerance stays exact.
Tolerance widened_for_amp(const Tolerance& t, const std::vector<double>& want, double amp_unit) {
  if (amp_unit == 0.0 || (t.abs == 0.0 && t.rel == 0.0)) return t;
  double largest = 0.0;
  for (double w : want)
    if (std::isfinite(w) && std::fabs(w) < std::ldexp(1.0, 90)) largest = std::max(largest, std::fabs(w));
  return {t.abs + kAmpBackendUnits * amp_unit * largest, t.rel};
}

}  // namespace

std::vector<OutputCheck> compare_backends(const OpCase& c, const NamedTensors& got, const NamedTensors& cpu,
                                          double amp_unit) {
  std::vector<OutputCheck> checks;
  for (const auto& t : c.outputs) {
    const Tensor* g = find_tensor(got, t.output);
    const Tensor* w = find_tensor(cpu, t.output);
    if (g == nullptr || w == nullptr) {
      checks.push_back(
          failed(t.output, g == nullptr ? "missing from the backend's outputs" : "missing from the CPU's"));
    } else if (g->shape() != w->shape() || g->dtype() != w->dtype()) {
      checks.push_back(failed(t.output, std::string("backend gives ") + dtype_name(g->dtype()) + " " +
                                            shape_string(g->shape()) + ", the CPU " + dtype_name(w->dtype()) + " " +
                                            shape_string(w->shape())));
    } else if (g->device() != Device::cpu) {
      checks.push_back(failed(t.output, "run() left it on " + std::string(device_name(g->device()))));
    } else {
      const std::vector<double> want = tensor_values(*w);
      checks.push_back(compare_values(t.output, tensor_values(*g), want, widened_for_amp(t.backend, want, amp_unit)));
    }
  }
  for (const auto& [name, tensor] : got)
    if (find_tolerance(c, name) == nullptr) checks.push_back(failed(name, "an output the case has no tolerance for"));
  return checks;
}

std::string describe(const OutputCheck& check) {
  std::string s = check.output + ": max abs " + format(check.max_abs) + ", max rel " + format(check.max_rel) +
                  " (tolerance abs " + format(check.tolerance.abs) + " rel " + format(check.tolerance.rel) + ")";
  if (!check.detail.empty()) s += "; " + check.detail;
  return s;
}

}  // namespace scaletrain::test
