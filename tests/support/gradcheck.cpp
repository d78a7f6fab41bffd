#include "support/gradcheck.hpp"

#include <boost/test/unit_test.hpp>
#include <cmath>
#include <limits>
#include <sstream>

#include "scaletrain/core/error.hpp"
#include "scaletrain/core/rng.hpp"

namespace scaletrain::test {

Context& cpu_context() {
  static Context ctx(Device::cpu);
  return ctx;
}

std::vector<double> numeric_gradient(const std::function<double()>& f, std::vector<double>& x, double h) {
  std::vector<double> g(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double fp = f();
    x[i] = saved - h;
    const double fm = f();
    x[i] = saved;
    g[i] = (fp - fm) / (2 * h);
  }
  return g;
}

std::vector<double> random_vector(std::size_t n, uint64_t seed, double lo, double hi) {
  Rng rng(seed);
  std::vector<double> v(n);
  for (auto& x : v) x = rng.uniform(lo, hi);
  return v;
}

Tensor to_tensor(const std::vector<double>& v, const Shape& shape) {
  ST_CHECK(static_cast<int64_t>(v.size()) == shape_numel(shape), "to_tensor: size mismatch");
  Tensor t = Tensor::empty(shape);
  float* p = t.data<float>();
  for (std::size_t i = 0; i < v.size(); ++i) p[i] = static_cast<float>(v[i]);
  return t;
}

std::vector<double> to_vector(const Tensor& t) {
  const float* p = t.data<float>();
  return std::vector<double>(p, p + t.numel());
}

double closeness(const std::vector<double>& a, const std::vector<double>& b, double atol, double rtol,
                 std::string* where) {
  if (a.size() != b.size()) {
    if (where) *where = "sizes differ: " + std::to_string(a.size()) + " vs " + std::to_string(b.size());
    return INFINITY;
  }
  double worst = 0.0;
  std::size_t worst_i = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    double c = std::fabs(a[i] - b[i]) / (atol + rtol * std::fabs(b[i]));
    if (!(c <= worst)) {  // also catches NaN
      worst = std::isnan(c) ? INFINITY : c;
      worst_i = i;
      if (std::isnan(c)) break;
    }
  }
  if (where) {
    std::ostringstream os;
    if (!a.empty())
      os << "worst at element " << worst_i << " of " << a.size() << ": " << a[worst_i] << " vs expected " << b[worst_i]
         << " (ratio to tolerance " << worst << ")";
    *where = os.str();
  }
  return worst;
}

std::vector<double> random_floats(std::size_t n, uint64_t seed, double lo, double hi) {
  auto v = random_vector(n, seed, lo, hi);
  for (auto& x : v) x = static_cast<float>(x);
  return v;
}

Tensor nan_tensor(const Shape& shape) {
  Tensor t = Tensor::empty(shape);
  t.fill(std::numeric_limits<float>::quiet_NaN());
  return t;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void check_throws(const std::function<void()>& f, std::initializer_list<std::string> needles) {
  try {
    f();
  } catch (const Error& e) {
    const std::string what = e.what();
    for (const auto& n : needles)
      BOOST_CHECK_MESSAGE(what.find(n) != std::string::npos, "'" << n << "' not in: " << what);
    return;
  }
  BOOST_ERROR("no scaletrain::Error thrown");
}

double central_difference(const std::function<double()>& f, float* p, float h) {
  const float saved = *p;
  *p = saved + h;
  const double fp = f();
  *p = saved - h;
  const double fm = f();
  *p = saved;
  return (fp - fm) / (2.0 * static_cast<double>(h));
}

double weighted_sum(const Tensor& y, const std::vector<double>& r) {
  const float* p = y.data<float>();
  double s = 0.0;
  for (std::size_t i = 0; i < r.size(); ++i) s += p[i] * r[i];
  return s;
}

}  // namespace scaletrain::test
