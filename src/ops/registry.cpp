// The op registry (ops/registry.hpp) and the dispatch point's ranges (op.hpp).
#include "scaletrain/ops/registry.hpp"

#include <algorithm>
#include <map>
#include <mutex>

#include "ops/op.hpp"
#include "scaletrain/backend/nvtx.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/timer.hpp"
#include "scaletrain/core/trace.hpp"
#include "scaletrain/ops/cast.hpp"
#include "scaletrain/ops/op_profiler.hpp"

namespace scaletrain::ops {

namespace {

// Filled during static initialisation (each op file's Op objects), read after main starts.
std::map<std::string, OpInfo>& registry() {
  static std::map<std::string, OpInfo> ops;
  return ops;
}
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

void register_op(const OpInfo& info) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  const bool inserted = registry().emplace(info.name, info).second;
  ST_CHECK(inserted, "internal error: op " << info.name << " is declared twice");
}

std::vector<OpInfo> registered_ops() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  std::vector<OpInfo> out;
  for (const auto& [name, info] : registry()) out.push_back(info);
  return out;
}

OpInfo op_info(const std::string& op) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  const auto it = registry().find(op);
  ST_CHECK(it != registry().end(), "no op named " << op << " is registered");
  return it->second;
}

bool supports(const std::string& op, Device device, Precision precision) {
  const int d = device_index(device);
  if (d < 0 || d >= kNumDevices) return false;
  const OpInfo info = op_info(op);
  return info.kernel[d] && (info.precisions[d] & precision_bit(precision)) != 0;
}

std::vector<std::string> unsupported_ops(const std::vector<std::string>& ops, Device device, Precision precision) {
  std::vector<std::string> out;
  for (const std::string& op : ops)
    if (!supports(op, device, precision) && std::find(out.begin(), out.end(), op) == out.end()) out.push_back(op);
  return out;
}

namespace {
std::vector<std::string> precision_names(PrecisionSet precisions) {
  std::vector<std::string> names;
  for (Precision p : {Precision::fp32, Precision::amp_fp16, Precision::amp_bf16})
    if (precisions & precision_bit(p)) names.push_back(precision_name(p));
  return names;
}
}  // namespace

std::string precision_list(PrecisionSet precisions) { return op_list(precision_names(precisions)); }

Json registry_json() {
  Json all = Json::object();
  for (const OpInfo& info : registered_ops()) {
    Json devices = Json::object();
    for (Device d : {Device::cpu, Device::cuda}) {
      if (!info.declared[device_index(d)]) continue;
      Json k = Json::object();
      k.set("deterministic", info.deterministic[device_index(d)]);
      k.set("built", info.kernel[device_index(d)]);
      k.set("precisions", Json::array_of(precision_names(info.precisions[device_index(d)])));
      k.set("half_storage", info.half_storage[device_index(d)]);
      devices.set(device_name(d), k);
    }
    Json j = Json::object();
    j.set("dtypes", info.dtypes);
    j.set("devices", devices);
    all.set(info.name, j);
  }
  return all;
}

std::string registry_markdown() {
  std::string out = "| op | dtypes | cpu | cuda | amp-fp16, amp-bf16 |\n| --- | --- | --- | --- | --- |\n";
  const PrecisionSet sixteen_bit = precision_bit(Precision::amp_fp16) | precision_bit(Precision::amp_bf16);
  for (const OpInfo& info : registered_ops()) {
    out += "| `" + info.name + "` | " + info.dtypes;
    std::string amp_devices;
    for (Device d : {Device::cpu, Device::cuda}) {
      const int i = device_index(d);
      out += std::string(" | ") + (!info.declared[i]       ? "no"
                                   : info.deterministic[i] ? "yes"
                                                           : "yes (not deterministic)");
      if (info.declared[i] && (info.precisions[i] & sixteen_bit) == sixteen_bit)
        amp_devices += (amp_devices.empty() ? "" : ", ") + std::string(device_name(d)) +
                       (info.half_storage[i] ? " (reads 16-bit storage)" : "");
    }
    out += " | " + (amp_devices.empty() ? std::string("none") : amp_devices) + " |\n";
  }
  return out;
}

std::string op_list(const std::vector<std::string>& ops) {
  std::string out;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (i > 0) out += i + 1 == ops.size() ? " and " : ", ";
    out += ops[i];
  }
  return out;
}

namespace {
thread_local OpRecorder* current_recorder = nullptr;
}

namespace {
thread_local MacCounter* current_mac_counter = nullptr;
}

MacCounter::MacCounter() : outer_(current_mac_counter) { current_mac_counter = this; }
MacCounter::~MacCounter() { current_mac_counter = outer_; }
void MacCounter::add(int64_t macs) {
  total_ += macs;
  if (outer_) outer_->add(macs);
}
void count_macs(int64_t macs) {
  if (current_mac_counter) current_mac_counter->add(macs);
}

OpRecorder::OpRecorder() : outer_(current_recorder) { current_recorder = this; }
OpRecorder::~OpRecorder() { current_recorder = outer_; }
void OpRecorder::add(const char* op) {
  ops_.insert(op);
  if (outer_) outer_->add(op);
}

// On either device: every kernel computes in fp32 and this is where its 16-bit outputs get their
// 16-bit values (on the GPU by round_to_half's kernel, on the context's stream after the op's).
void round_amp_output(Context& ctx, Tensor& t) {
  const std::optional<HalfFormat> format = storage_format(ctx.precision());
  if (!format || !t.defined() || t.dtype() != DType::f32 || t.numel() == 0) return;
  if (t.device() == Device::cpu) {
    round_in_place(*format, t.data<float>(), t.numel());
  } else {
    round_to_half(ctx, t, *format);
  }
}

bool is_half_dtype(DType dtype) { return dtype == DType::f16 || dtype == DType::bf16; }

void no_kernel_in_precision(const char* op, Device device, Precision precision, PrecisionSet runs_in) {
  ST_THROW(op << ": its " << device_name(device) << " kernel runs in " << precision_list(runs_in) << ", not in "
              << precision_name(precision) << " (--precision)");
}

OpScope::OpScope(const char* name) noexcept : name_(name) {
  if (current_recorder) {
    try {
      current_recorder->add(name);
    } catch (...) {  // out of memory for a name: the recording is a test's, the op still runs
    }
  }
  nvtx_push(name);
  if (trace::enabled()) start_s_ = now_seconds();
  profiler_ = OpProfiler::current();
  if (profiler_ != nullptr) profiler_->enter(name);
}

OpScope::~OpScope() {
  if (profiler_ != nullptr) profiler_->leave();
  if (start_s_ >= 0.0) {
    try {
      trace::record(name_, "op", trace::kMainThread, start_s_, now_seconds());
    } catch (...) {  // a trace event is not worth an exception out of a destructor
    }
  }
  nvtx_pop();
}

}  // namespace scaletrain::ops
