// The op registry: every op of src/ops, by name, with the devices that have a kernel for it,
// whether each kernel is deterministic (the same bits from run to run on the same inputs) and the
// precisions (--precision) it runs in. One
// fact, one place: the op's own file declares its kernels (src/ops/op.hpp), the dispatch, the
// --device decision (supports), `scaletrain info --json`, docs/ops.md and the op-case coverage
// test all read it from here.
//
// An op is registered by its file's static initialisation, so a program knows the ops it links:
// every program that links the models or the optimizers links every op.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "scaletrain/backend/context.hpp"
#include "scaletrain/core/json.hpp"
#include "scaletrain/tensor/tensor.hpp"

namespace scaletrain::ops {

// A set of op names: what a model, an optimizer or a task runs.
using OpNames = std::set<std::string>;

constexpr int kNumDevices = 2;  // Device::cpu, Device::cuda
inline int device_index(Device d) { return static_cast<int>(d); }

// A set of precisions (--precision), a bit each.
using PrecisionSet = unsigned;
constexpr PrecisionSet precision_bit(Precision p) { return 1u << static_cast<unsigned>(p); }
constexpr PrecisionSet kFp32Only = precision_bit(Precision::fp32);
constexpr PrecisionSet kEveryPrecision =
    precision_bit(Precision::fp32) | precision_bit(Precision::amp_fp16) | precision_bit(Precision::amp_bf16);
// "fp32, amp-fp16 and amp-bf16".
std::string precision_list(PrecisionSet precisions);

struct OpInfo {
  std::string name;                      // the public function's name, e.g. "conv2d_forward"
  std::string dtypes;                    // the dtypes of its float tensors, e.g. "f32"
  bool kernel[kNumDevices] = {};         // a kernel for that device is in this build
  bool declared[kNumDevices] = {};       // the source has one (a build without CUDA leaves CUDA's out)
  bool deterministic[kNumDevices] = {};  // that kernel gives the same bits run to run
  // The precisions that kernel runs in. The CPU's run in every one: they compute in fp32 and the
  // dispatch point rounds their 16-bit outputs (ops/op.hpp), the reference for the GPU's. A CUDA
  // kernel runs in fp32 unless it declares its 16-bit versions.
  PrecisionSet precisions[kNumDevices] = {};
  // That kernel reads and writes f16/bf16 tensors itself (16-bit storage under a mixed precision);
  // otherwise the dispatch widens them for it (ops/op.hpp).
  bool half_storage[kNumDevices] = {};
};

// Every registered op, sorted by name.
std::vector<OpInfo> registered_ops();
// The op's entry; throws naming the op when none is registered.
OpInfo op_info(const std::string& op);
// Whether `op` has a kernel on `device` in this build that runs in `precision`; throws for an
// unknown op.
bool supports(const std::string& op, Device device, Precision precision = Precision::fp32);
// The ops of `ops` without a kernel on `device` in `precision`, in their order.
std::vector<std::string> unsupported_ops(const std::vector<std::string>& ops, Device device,
                                         Precision precision = Precision::fp32);

// "op_a, op_b and op_c".
std::string op_list(const std::vector<std::string>& ops);

// Records the ops dispatched on this thread while it lives (nested recorders each see every op):
// what a model's forward and backward really run, against what the model says it runs.
class OpRecorder {
 public:
  OpRecorder();
  ~OpRecorder();
  OpRecorder(const OpRecorder&) = delete;
  OpRecorder& operator=(const OpRecorder&) = delete;
  const OpNames& ops() const { return ops_; }
  void add(const char* op);  // the dispatch point's

 private:
  OpNames ops_;
  OpRecorder* outer_;
};

// Counts the multiply-adds of the convolutions and matrix products (conv2d_forward,
// linear_forward) dispatched on this thread while it lives: `scaletrain info`'s forward
// multiply-adds per sample, from one forward of one sample. Nested counters each see every op.
class MacCounter {
 public:
  MacCounter();
  ~MacCounter();
  MacCounter(const MacCounter&) = delete;
  MacCounter& operator=(const MacCounter&) = delete;
  int64_t total() const { return total_; }
  void add(int64_t macs);

 private:
  int64_t total_ = 0;
  MacCounter* outer_;
};
// What an op adds to the live counters (none: nothing).
void count_macs(int64_t macs);

// Called by an op's declaration (src/ops/op.hpp); a name registered twice is an error at start-up.
void register_op(const OpInfo& info);

// The registry as JSON: {"op": {"dtypes": "f32", "devices": {"cpu": {"deterministic": true,
// "built": true, "precisions": ["fp32", "amp-fp16", "amp-bf16"]}, ...}}}, a device listed where
// the source has a kernel for it.
Json registry_json();
// docs/ops.md's table: op, dtypes, per device "yes", "yes (not deterministic)" or "no", and the
// devices whose kernel runs in the mixed precisions.
std::string registry_markdown();

}  // namespace scaletrain::ops
