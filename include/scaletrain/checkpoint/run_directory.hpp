// The checkpoints of a run directory (train --output-dir), as docs/checkpoint-format.md names them:
//   <run>/checkpoints/step-<9 digits>.h5   one per checkpoint, by optimizer step
//   <run>/checkpoints/latest               the newest one's file name, one line, written last
// Retention keeps the newest K. Readers take the newest checkpoint that is complete and whose
// checksum matches, from the highest step down (`latest` is for people and tools that follow one
// name), so a damaged file costs at most the steps since the one before. Not collective: rank 0
// manages the directory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "scaletrain/checkpoint/checkpoint.hpp"

namespace scaletrain::checkpoint {

std::string checkpoints_dir(const std::string& run_dir);
std::string checkpoint_file(const std::string& run_dir, int64_t step);

// Published checkpoint files (no *.tmp) in the order readers try them: from the highest step
// down. Empty when there are none (or no directory).
std::vector<std::string> list_checkpoints(const std::string& run_dir);

// Points `latest` at checkpoint_path (a file in checkpoints_dir) atomically (temporary file,
// fsync, rename).
void publish_latest(const std::string& run_dir, const std::string& checkpoint_path);

// Deletes all but the `keep` newest checkpoints (by step; never the one `latest` names) and any
// *.tmp left by an interrupted write. Returns the paths deleted.
std::vector<std::string> prune_checkpoints(const std::string& run_dir, int keep);

// A run resumed from `step` while checkpoints of higher steps exist (they failed to verify):
// renames those to "<name>.damaged", out of the readers' and retention's way but kept for a
// look. Returns the new names.
std::vector<std::string> set_aside_newer_checkpoints(const std::string& run_dir, int64_t step);

// `path` is a checkpoint file: read_checkpoint(path). A run directory (or its checkpoints/
// folder): the first checkpoint of list_checkpoints that reads and verifies; each one that does
// not is skipped with a warning naming it and why. Throws, naming the directory, when there is
// no checkpoint or none is valid.
CheckpointData read_newest_checkpoint(const std::string& path);

}  // namespace scaletrain::checkpoint
