// The recommendation task's shards: reading a split whole with every check of
// docs/dataset-format.md ("Recommendation"), each error naming the file, and the writers.
#include "scaletrain/data/recommendation.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "data/shard_files.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/data/dataset.hpp"
#include "scaletrain/data/negative_sampler.hpp"
#include "scaletrain/io/hdf5.hpp"

namespace scaletrain::data {
namespace fs = std::filesystem;

namespace {

int64_t positive_attribute(const io::H5File& f, const char* name) {
  ST_CHECK(f.has_attribute(name), f.path() << ": missing root attribute '" << name
                                           << "' (an integer; see docs/dataset-format.md, Recommendation)");
  const int64_t v = f.get_int_attribute(name);
  // int32 ids: at most 2^31 - 1 distinct values.
  ST_CHECK(v > 0 && v <= INT32_MAX, f.path() << ": " << name << " = " << v << " is not in [1, 2^31 - 1]");
  return v;
}

Shape int32_dataset(const io::H5File& f, const char* name, int rank, const char* layout) {
  return typed_dataset(f, name, "int32", rank, layout);
}

std::vector<int32_t> read_ids(const io::H5File& f, const char* name, int64_t count, int64_t limit) {
  if (count == 0) return {};
  // Read first: H5File::read checks the size against the file before allocating.
  const Tensor t = f.read(name, DType::i32);
  ST_CHECK(t.numel() == count,
           f.path() << ": dataset '" << name << "' holds " << t.numel() << " ids, expected " << count);
  std::vector<int32_t> v(static_cast<std::size_t>(count));
  std::memcpy(v.data(), t.data<int32_t>(), v.size() * sizeof(int32_t));
  for (int64_t i = 0; i < count; ++i)
    ST_CHECK(v[i] >= 0 && v[i] < limit,
             f.path() << ": " << name << "[" << i << "] = " << v[i] << " is out of range [0, " << limit << ")");
  return v;
}

// One shard's contents appended to `s`; the first shard sets num_users/num_items/K.
void read_recommendation_shard(const std::string& path, bool first, RecommendationSplit& s) {
  io::H5File f(path, io::H5File::Mode::read);
  ST_CHECK(f.has_attribute("scaletrain_format"),
           path << ": missing root attribute 'scaletrain_format' (not a scaletrain dataset shard?)");
  const int64_t version = f.get_int_attribute("scaletrain_format");
  ST_CHECK(version == kFormatVersion, path << ": dataset format version " << version
                                           << " is not supported for recommendation (expected " << kFormatVersion
                                           << ")");
  ST_CHECK(f.has_attribute("task"), path << ": missing root attribute 'task' (a string)");
  const std::string task = f.get_string_attribute("task");
  ST_CHECK(task == kTaskRecommendation,
           path << ": task '" << task << "', expected '" << kTaskRecommendation << "' (a recommendation split)");
  const int64_t users = positive_attribute(f, "num_users"), items = positive_attribute(f, "num_items");
  const bool evaluation = f.is_dataset("negatives");
  const Shape u = int32_dataset(f, "user", 1, "[N]");
  const Shape i = int32_dataset(f, "item", 1, "[N]");
  ST_CHECK(u[0] == i[0], path << ": 'user' has " << u[0] << " rows but 'item' has " << i[0]);
  int64_t k = 0;
  if (evaluation) {
    const Shape n = int32_dataset(f, "negatives", 2, "[U, K]");
    ST_CHECK(n[0] == u[0], path << ": 'negatives' has " << n[0] << " rows but 'user' has " << u[0]);
    ST_CHECK(n[1] > 0, path << ": 'negatives' has no columns (K = 0)");
    k = n[1];
  }
  if (first) {
    s.num_users = users;
    s.num_items = items;
    s.negatives_per_user = k;
  } else {
    const std::string& p0 = s.shards.front();
    ST_CHECK(users == s.num_users && items == s.num_items,
             path << ": num_users/num_items = " << users << "/" << items << " but " << p0 << " has " << s.num_users
                  << "/" << s.num_items << " (all shards of a split share them)");
    ST_CHECK(k == s.negatives_per_user, path << ": " << (evaluation ? "" : "no ") << "'negatives'"
                                             << (evaluation ? " with K = " + std::to_string(k) : std::string())
                                             << " but " << p0 << " has K = " << s.negatives_per_user
                                             << " (a split is either training positives or evaluation rows)");
  }
  const std::vector<int32_t> user = read_ids(f, "user", u[0], users);
  const std::vector<int32_t> item = read_ids(f, "item", u[0], items);
  if (evaluation) {
    const std::vector<int32_t> neg = read_ids(f, "negatives", u[0] * k, items);
    for (int64_t r = 0; r < u[0]; ++r)
      for (int64_t j = 0; j < k; ++j)
        ST_CHECK(neg[r * k + j] != item[r], path << ": negatives[" << r << ", " << j << "] = " << neg[r * k + j]
                                                 << " is the held-out item of user " << user[r]);
    s.negatives.insert(s.negatives.end(), neg.begin(), neg.end());
  }
  s.shards.push_back(path);
  s.shard_rows.push_back(u[0]);
  s.user.insert(s.user.end(), user.begin(), user.end());
  s.item.insert(s.item.end(), item.begin(), item.end());
}

// Every user in [0, num_users) has exactly one evaluation row.
// "row 3 of DIR/train/shard-00001-of-00004.h5": where split row r lies, for messages.
std::string row_place(const RecommendationSplit& s, int64_t r) {
  std::size_t shard = 0;
  while (shard + 1 < s.shard_rows.size() && r >= s.shard_rows[shard]) r -= s.shard_rows[shard++];
  return "row " + std::to_string(r) + " of " + s.shards[shard];
}

// The first few shard paths, for a message about the split as a whole.
std::string some_shards(const RecommendationSplit& s) {
  std::string list;
  for (std::size_t i = 0; i < s.shards.size() && i < 3; ++i) list += (i ? ", " : "") + s.shards[i];
  return s.shards.size() > 3 ? list + ", ..." : list;
}

void check_one_row_per_user(const RecommendationSplit& s) {
  std::vector<int64_t> row_of(static_cast<std::size_t>(s.num_users), -1);
  for (int64_t r = 0; r < s.rows(); ++r) {
    int64_t& seen = row_of[s.user[r]];
    ST_CHECK(seen < 0, s.dir << ": user " << s.user[r] << " has two held-out items: " << row_place(s, seen) << " and "
                             << row_place(s, r));
    seen = r;
  }
  for (int64_t u = 0; u < s.num_users; ++u)
    ST_CHECK(row_of[u] >= 0, s.dir << ": user " << u << " has no held-out item in the split's shards ("
                                   << some_shards(s) << "; every user in [0, " << s.num_users << ") needs one row)");
}

Tensor ids_tensor(const std::vector<int32_t>& v, const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::i32);
  if (!v.empty()) std::memcpy(t.data<int32_t>(), v.data(), v.size() * sizeof(int32_t));
  return t;
}

void check_ids(const std::string& path, const char* name, const std::vector<int32_t>& v, int64_t limit) {
  for (std::size_t i = 0; i < v.size(); ++i)
    ST_CHECK(v[i] >= 0 && v[i] < limit,
             path << ": " << name << "[" << i << "] = " << v[i] << " is out of range [0, " << limit << ")");
}

// Opens path.tmp with the root attributes, lets `fill` write the datasets, then renames.
template <typename Fill>
void write_shard(const std::string& path, int64_t num_users, int64_t num_items, Fill fill) {
  const std::string tmp = path + ".tmp";
  {
    io::H5File f(tmp, io::H5File::Mode::create_truncate);
    f.set_attribute("scaletrain_format", int64_t(kFormatVersion));
    f.set_fixed_string_attribute("task", kTaskRecommendation);
    f.set_attribute("num_users", num_users);
    f.set_attribute("num_items", num_items);
    fill(f);
    f.close();
  }
  publish_shard(path);
}

}  // namespace

std::string split_task(const std::string& dataset_dir, const std::string& split) {
  const std::vector<std::string> paths = shard_paths(dataset_dir, split);
  // Sizes before HDF5 opens anything, as open_split does: a damaged shard must not reach libhdf5.
  const std::optional<Manifest> manifest = read_manifest((fs::path(dataset_dir) / split).string());
  if (manifest) check_manifest_sizes(*manifest, paths);
  const io::H5File f(paths.front(), io::H5File::Mode::read);
  return f.has_attribute("task") ? f.get_string_attribute("task") : std::string();
}

RecommendationSplit open_recommendation_split(const std::string& dataset_dir, const std::string& split) {
  RecommendationSplit s;
  s.dir = (fs::path(dataset_dir) / split).string();
  const std::vector<std::string> paths = shard_paths(dataset_dir, split);
  // Sizes first: a shard cut short or still being copied never reaches HDF5.
  s.manifest = read_manifest(s.dir);
  if (s.manifest) check_manifest_sizes(*s.manifest, paths);
  s.unchecked_shards = unchecked_shards(paths, s.manifest);
  for (std::size_t i = 0; i < paths.size(); ++i) read_recommendation_shard(paths[i], i == 0, s);
  ST_CHECK(s.rows() > 0,
           s.dir << ": the shards hold no " << (s.is_evaluation() ? "users" : "positives") << " (an empty split)");
  if (s.is_evaluation()) check_one_row_per_user(s);
  return s;
}

void check_train_and_eval_agree(const RecommendationSplit& train, const RecommendationSplit& val) {
  ST_CHECK(!train.is_evaluation() && val.is_evaluation(),
           train.dir << " and " << val.dir << ": expected training positives and evaluation rows (with 'negatives')");
  ST_CHECK(train.num_users == val.num_users && train.num_items == val.num_items,
           train.dir << " has num_users/num_items = " << train.num_users << "/" << train.num_items << " but " << val.dir
                     << " has " << val.num_users << "/" << val.num_items);
  const UserPositives positives(train.num_users, train.num_items, train.user.data(), train.item.data(), train.rows());
  const int64_t k = val.negatives_per_user;
  for (int64_t r = 0; r < val.rows(); ++r) {
    const int32_t user = val.user[r];
    ST_CHECK(!positives.contains(user, val.item[r]), val.dir << ": the held-out item " << val.item[r] << " of user "
                                                             << user << " is also one of its training positives in "
                                                             << train.dir);
    for (int64_t j = 0; j < k; ++j)
      ST_CHECK(!positives.contains(user, val.negatives[r * k + j]),
               val.dir << ": negative " << val.negatives[r * k + j] << " of user " << user << " (row " << r
                       << ") is one of its training positives in " << train.dir);
  }
}

void write_recommendation_train_shard(const std::string& path, int64_t num_users, int64_t num_items,
                                      const std::vector<int32_t>& user, const std::vector<int32_t>& item) {
  ST_CHECK(user.size() == item.size(), path << ": " << user.size() << " users but " << item.size() << " items");
  check_ids(path, "user", user, num_users);
  check_ids(path, "item", item, num_items);
  const int64_t n = static_cast<int64_t>(user.size());
  write_shard(path, num_users, num_items, [&](io::H5File& f) {
    f.write("user", ids_tensor(user, {n}));
    f.write("item", ids_tensor(item, {n}));
  });
}

void write_recommendation_eval_shard(const std::string& path, int64_t num_users, int64_t num_items,
                                     const std::vector<int32_t>& user, const std::vector<int32_t>& item,
                                     const std::vector<int32_t>& negatives, int64_t negatives_per_user) {
  const int64_t n = static_cast<int64_t>(user.size());
  ST_CHECK(item.size() == user.size() && negatives_per_user > 0 &&
               static_cast<int64_t>(negatives.size()) == n * negatives_per_user,
           path << ": " << n << " users need " << n << " held-out items and " << n << " x " << negatives_per_user
                << " negatives, got " << item.size() << " and " << negatives.size());
  check_ids(path, "user", user, num_users);
  check_ids(path, "item", item, num_items);
  check_ids(path, "negatives", negatives, num_items);
  write_shard(path, num_users, num_items, [&](io::H5File& f) {
    f.write("user", ids_tensor(user, {n}));
    f.write("item", ids_tensor(item, {n}));
    f.write("negatives", ids_tensor(negatives, {n, negatives_per_user}));
  });
}

void write_recommendation_dataset(const std::string& output, const RecommendationData& d, int64_t shards, int rank,
                                  int ranks) {
  const int64_t positives = static_cast<int64_t>(d.train_user.size());
  const int64_t train_shards = std::max<int64_t>(1, std::min(shards, positives));
  const int64_t val_shards = std::max<int64_t>(1, std::min(shards, d.num_users));
  const int64_t k = d.negatives_per_user;
  for (int64_t t = rank; t < train_shards + val_shards; t += ranks) {
    if (t < train_shards) {
      const auto [b, e] = shard_range(positives, t, train_shards);
      const std::string path = (fs::path(output) / "train" / shard_file_name(t, train_shards)).string();
      write_recommendation_train_shard(path, d.num_users, d.num_items,
                                       {d.train_user.begin() + b, d.train_user.begin() + e},
                                       {d.train_item.begin() + b, d.train_item.begin() + e});
    } else {
      const int64_t v = t - train_shards;
      const auto [b, e] = shard_range(d.num_users, v, val_shards);
      std::vector<int32_t> users(static_cast<std::size_t>(e - b));
      for (int64_t u = b; u < e; ++u) users[u - b] = static_cast<int32_t>(u);
      const std::string path = (fs::path(output) / "val" / shard_file_name(v, val_shards)).string();
      write_recommendation_eval_shard(path, d.num_users, d.num_items, users,
                                      {d.heldout_item.begin() + b, d.heldout_item.begin() + e},
                                      {d.negatives.begin() + b * k, d.negatives.begin() + e * k}, k);
    }
  }
}

}  // namespace scaletrain::data
