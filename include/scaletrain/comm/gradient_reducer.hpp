// GradientReducer: the trainer's only view of gradient communication. It is told when each
// parameter's gradient is complete during backward (on_grad_ready) and, before the optimizer
// step, waits until the flat gradient buffer holds the average over all ranks (finish).
// The flat implementation here all-reduces the whole buffer after backward; the hierarchical,
// bucketed and overlapped reducer replaces it behind this interface.
#pragma once

#include <memory>
#include <string>

#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/nn/parameters.hpp"

namespace scaletrain::comm {

class GradientReducer {
 public:
  virtual ~GradientReducer() = default;
  virtual std::string name() const = 0;
  // Called once per step before backward starts.
  virtual void begin_step() {}
  // Called during backward when parameter `index`'s gradient is written.
  virtual void on_grad_ready(int index) { (void)index; }
  // Returns when params.flat_grads() holds the mean over ranks; the time spent waiting here
  // is the exposed communication time.
  virtual void finish() = 0;
  // Bytes all-reduced per step (for the report).
  virtual int64_t bytes_per_step() const = 0;
};

// One MPI all-reduce of the whole flat gradient buffer after backward, then divide by size.
std::unique_ptr<GradientReducer> make_flat_reducer(const Communicator& comm, nn::ParameterSet& params);

}  // namespace scaletrain::comm
