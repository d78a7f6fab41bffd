// Test support: central finite differences and tolerant comparisons shared by the op tests.
// Float64 references (tests/support/reference_*.hpp) work on std::vector<double> in the same
// layouts as the kernels (channels-last activations, OIHW conv weights).
#pragma once

#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "scaletrain/backend/context.hpp"
#include "scaletrain/tensor/tensor.hpp"

namespace scaletrain::test {

// The CPU context that tests without one of their own step optimizers on: one per process, since
// each Context builds a oneDNN engine.
Context& cpu_context();

// d f / d x by central differences, perturbing each x[i] by +-h in turn (x restored after).
std::vector<double> numeric_gradient(const std::function<double()>& f, std::vector<double>& x, double h = 1e-6);

// d f / d *p by a central difference with step h in float (*p restored after): for a layer's
// input or weight, which live in float32 tensors.
double central_difference(const std::function<double()>& f, float* p, float h);

// sum(y * r) in double: a scalar loss whose gradient with respect to y is r.
double weighted_sum(const Tensor& y, const std::vector<double>& r);

// Random values in [lo, hi) from a fixed seed.
std::vector<double> random_vector(std::size_t n, uint64_t seed, double lo = -1.0, double hi = 1.0);

// Random values in [lo, hi) already rounded to float, so that a float32 tensor holds them exactly
// and the kernel and the float64 reference see the same inputs.
std::vector<double> random_floats(std::size_t n, uint64_t seed, double lo = -1.0, double hi = 1.0);

// A float32 tensor full of NaN: an output the op must overwrite, not accumulate into.
Tensor nan_tensor(const Shape& shape);

// The message of the scaletrain::Error that f throws, or "" when it throws none.
std::string error_of(const std::function<void()>& f);
// Boost.Test checks that f throws a scaletrain::Error whose message contains every needle.
void check_throws(const std::function<void()>& f, std::initializer_list<std::string> needles);

// f32 tensor from doubles (rounded), and back.
Tensor to_tensor(const std::vector<double>& v, const Shape& shape);
std::vector<double> to_vector(const Tensor& t);

// Largest |a - b| / (atol + rtol * |b|) over elements; <= 1 means "close". Also fills `where`
// with a description of the worst element for failure messages.
double closeness(const std::vector<double>& a, const std::vector<double>& b, double atol, double rtol,
                 std::string* where = nullptr);

}  // namespace scaletrain::test

// BOOST-style assertion: every element of a within atol + rtol*|b| of b.
#define ST_CHECK_CLOSE_VECTORS(a, b, atol, rtol)                                        \
  do {                                                                                  \
    std::string st_where_;                                                              \
    double st_c_ = ::scaletrain::test::closeness((a), (b), (atol), (rtol), &st_where_); \
    BOOST_TEST(st_c_ <= 1.0, "not close: " << st_where_);                               \
  } while (0)
