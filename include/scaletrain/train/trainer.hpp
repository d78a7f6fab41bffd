// The training loop: data-parallel SGD over MPI ranks. It sees the all-reduce only through
// comm::GradientReducer and the input only through data::Loader, so both can be swapped.
#pragma once

#include <string>

#include "scaletrain/backend/context.hpp"
#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/core/json.hpp"
#include "scaletrain/data/dataset.hpp"
#include "scaletrain/models/model.hpp"
#include "scaletrain/train/config.hpp"

namespace scaletrain::train {

// Runs a whole training; writes report.json and checkpoint.h5 into config.output_dir (rank 0)
// and returns the report. `resolved_config` is recorded verbatim in the report.
Json run_training(const comm::Communicator& comm, const TrainConfig& config, const Json& resolved_config);

struct EvalResult {
  int64_t correct = 0;
  int64_t samples = 0;
  double loss = 0.0;  // mean cross-entropy (no smoothing)
  double accuracy() const { return samples ? static_cast<double>(correct) / samples : 0.0; }
};

// Top-1 accuracy on a split, sharded over ranks (every sample exactly once) and reduced.
// Batch norm runs in evaluation mode; the split is read as `data_options` say.
EvalResult evaluate(const comm::Communicator& comm, Context& ctx, models::Model& model, const data::SplitInfo& split,
                    int64_t batch_size, const EvalDataOptions& data_options = {});

// Threads per rank when --threads is 0: the node's cores shared evenly by its ranks.
int default_threads(const comm::Communicator& comm);

// Checks that a dataset fits a model checkpoint before loading it (channels and classes), with
// a message naming both files.
void check_checkpoint_fits(const std::string& checkpoint, int channels, int num_classes, const std::string& data_dir);

}  // namespace scaletrain::train
