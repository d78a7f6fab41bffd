// The recommendation task of the dataset format (docs/dataset-format.md, "Recommendation"):
// implicit feedback, every (user, item) interaction a positive, ids dense int32 in
// [0, num_users) and [0, num_items). A split is HDF5 shards like the image task's (format
// version, fixed-length `task`, manifest.json), holding either
//   - training positives: `user`, `item` int32 [N] (train/), or
//   - the evaluation set: per user one held-out positive and the negatives it is ranked against,
//     `user`, `item` int32 [U] and `negatives` int32 [U, K] (val/), as in NCF's leave-one-out
//     protocol (He et al. 2017; MLPerf's NCF reference uses K = 999).
// The whole split is small (ml-20m: 20M positives, 160 MB), so a reader holds it in memory:
// open_recommendation_split reads and checks every shard up front, each error naming the file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "scaletrain/data/manifest.hpp"

namespace scaletrain::data {

constexpr const char* kTaskRecommendation = "recommendation";
// Negatives each held-out item is ranked against: MLPerf's NCF reference (ml-20m, HR@10).
constexpr int64_t kDefaultEvalNegatives = 999;

struct RecommendationSplit {
  std::string dir;                            // e.g. DATA/train
  std::vector<std::string> shards;            // paths, in name order
  std::vector<int64_t> shard_rows;            // rows of each shard (positives, or users for evaluation)
  std::optional<Manifest> manifest;           // when the split has one (sizes checked on open)
  std::vector<std::string> unchecked_shards;  // unchecksummed metadata, not in the manifest (manifest.hpp)
  int64_t num_users = 0, num_items = 0;
  // Training: the positives. Evaluation: one row per user, item = its held-out positive.
  std::vector<int32_t> user, item;
  // Evaluation only (0 and empty for a training split): row r's negatives are
  // negatives[r * negatives_per_user, (r + 1) * negatives_per_user).
  int64_t negatives_per_user = 0;
  std::vector<int32_t> negatives;
  bool is_evaluation() const { return negatives_per_user > 0; }
  int64_t rows() const { return static_cast<int64_t>(user.size()); }
};

// Opens and checks every shard of DATA/<split>. Throws scaletrain::Error naming the file for: a
// missing directory or no *.h5 shards, a shard of another task or version, a missing attribute
// or dataset, a dtype other than int32, datasets of different lengths, a user or item id out of
// range (with the row's index in the file), shards that disagree on num_users, num_items or K,
// and an empty split. An evaluation split must hold every user exactly once (a user without a
// held-out item is named), and no negative may equal its row's held-out item.
RecommendationSplit open_recommendation_split(const std::string& dataset_dir, const std::string& split);

// A training and an evaluation split of one dataset agree: train is positives and val evaluation
// rows, with the same num_users and num_items, and no held-out item or negative of val is a
// training positive of its user (the leave-one-out contract). Throws naming both directories and
// the first row at fault. Costs a sort of the training positives and a binary search per negative
// (ml-20m: a few seconds), so readers call it once, not per epoch.
void check_train_and_eval_agree(const RecommendationSplit& train, const RecommendationSplit& val);

// The task attribute of the first shard of DATA/<split> (to choose a reader), "" when it has none
// (the reader then says what is missing). Checks the manifest's sizes first; throws like
// open_split for a missing split, one without shards, or a shard that HDF5 cannot open.
std::string split_task(const std::string& dataset_dir, const std::string& split);

// Writers, to `path.tmp` then renamed (a reader never sees a half-written shard). The ids are
// checked against num_users / num_items first. The manifest covers the bytes; no `checksum`
// attribute is stamped (that one covers image shards for staging).
void write_recommendation_train_shard(const std::string& path, int64_t num_users, int64_t num_items,
                                      const std::vector<int32_t>& user, const std::vector<int32_t>& item);
// negatives: user.size() * negatives_per_user ids, row-major.
void write_recommendation_eval_shard(const std::string& path, int64_t num_users, int64_t num_items,
                                     const std::vector<int32_t>& user, const std::vector<int32_t>& item,
                                     const std::vector<int32_t>& negatives, int64_t negatives_per_user);

// A whole dataset in memory, as the converters build it.
struct RecommendationData {
  int64_t num_users = 0, num_items = 0;
  std::vector<int32_t> train_user, train_item;  // training positives
  std::vector<int32_t> heldout_item;            // [num_users]: user u's held-out positive
  std::vector<int32_t> negatives;               // [num_users * negatives_per_user]
  int64_t negatives_per_user = 0;
  int64_t users_without_training = 0;  // users whose only positive is the held-out one
};
// Writes train/ in min(shards, positives) shards (positives in the given order) and val/ in
// min(shards, users) shards (rows in user order); shard i of that list (train, then val) is
// written by this process when i % ranks == rank. OUTPUT/train and OUTPUT/val must exist.
void write_recommendation_dataset(const std::string& output, const RecommendationData& data, int64_t shards, int rank,
                                  int ranks);

}  // namespace scaletrain::data
