// --op-times (op_times.hpp).
#include "scaletrain/train/op_times.hpp"

#include <cstdio>
#include <sstream>

#include "scaletrain/core/log.hpp"

namespace scaletrain::train {

namespace {

constexpr std::size_t kLoggedOps = 15;

// The table printed at the run's end: the longest ops of a step.
std::string op_table(const Json& t) {
  std::ostringstream os;
  char line[160];
  std::snprintf(line, sizeof line, "op times per step (rank 0, %s, %lld steps after the first): %.2f ms in ops",
                t.at("clock").as_string().c_str(), static_cast<long long>(t.at("steps").as_int()),
                t.at("top_level_ms_per_step").as_double());
  os << line;
  const Json& ops = t.at("ops");
  for (std::size_t i = 0; i < ops.size() && i < kLoggedOps; ++i) {
    const Json& o = ops.at(i);
    std::snprintf(line, sizeof line, "\n  %-34s %7.1f calls %9.3f ms %6.1f%%%s", o.at("op").as_string().c_str(),
                  o.at("calls_per_step").as_double(), o.at("ms_per_step").as_double(),
                  100.0 * o.at("share").as_double(), o.at("nested").as_bool() ? "  (inside other ops)" : "");
    os << line;
  }
  if (ops.size() > kLoggedOps) os << "\n  ... " << ops.size() - kLoggedOps << " more in report.json's op_times";
  return os.str();
}

}  // namespace

void OpTimes::on_step_end(const StepEnd&) {
  profiler_.end_step(/*keep=*/warm_);
  warm_ = true;
}

Json op_times_json(const ops::OpProfiler& profiler) {
  const int64_t steps = profiler.steps();
  if (steps == 0) return Json();
  const double n = static_cast<double>(steps), top = profiler.top_level_seconds();
  Json ops = Json::array();
  for (const ops::OpTime& t : profiler.totals()) {
    Json o = Json::object();
    o.set("op", t.op);
    o.set("calls_per_step", static_cast<double>(t.calls) / n);
    o.set("ms_per_step", 1e3 * t.seconds / n);
    o.set("share", top > 0 ? t.seconds / top : 0.0);
    o.set("nested", t.always_nested);
    ops.push_back(o);
  }
  Json j = Json::object();
  j.set("clock", profiler.clock());
  j.set("steps", steps);
  j.set("top_level_ms_per_step", 1e3 * top / n);
  j.set("ops", ops);
  return j;
}

void OpTimes::fill(report::TrainSummary& summary) {
  summary.op_times = op_times_json(profiler_);
  if (!summary.op_times.is_null()) ST_LOG(op_table(summary.op_times));
}

}  // namespace scaletrain::train
