// scaletrain-data for the recommendation task (docs/dataset-format.md, "Recommendation"):
// `convert movielens`, `synthetic --task recommendation`, and inspect's description of a
// recommendation split. Every rank builds the same dataset in memory (ml-20m: 20M ratings, a few
// hundred MB while parsing) and writes shard i of the list (train, then val) when i mod P is its
// rank, so the result does not depend on P; rank 0 then re-opens every split with its checks.
#include <mpi.h>

#include <filesystem>
#include <iomanip>
#include <iostream>

#include "cli/data_subcommands.hpp"
#include "scaletrain/comm/agreement.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/json.hpp"
#include "scaletrain/core/timer.hpp"
#include "scaletrain/data/movielens.hpp"
#include "scaletrain/data/negative_sampler.hpp"
#include "scaletrain/data/recommendation.hpp"

namespace po = boost::program_options;

namespace scaletrain::cli {
namespace {

// Writes both splits and their manifests, then rank 0 re-opens them and prints a summary.
void write_and_report(const data::RecommendationData& d, const std::string& output, int64_t shards, bool overwrite,
                      const Stopwatch& clock) {
  const Ranks ranks;
  prepare_output(ranks.rank, output, {"train", "val"}, overwrite);
  // An error while writing stops every rank (the guard turns it into MPI_Abort).
  data::write_recommendation_dataset(output, d, shards, ranks.rank, ranks.size);
  ST_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  write_manifests(output, {"train", "val"});
  comm::on_rank0_agreed(comm::Communicator::world(), [&] {
    // What was written, read back with every check, train and val against each other.
    const data::RecommendationSplit train = data::open_recommendation_split(output, "train");
    const data::RecommendationSplit val = data::open_recommendation_split(output, "val");
    data::check_train_and_eval_agree(train, val);
    print_recommendation_split(train, false);
    print_recommendation_split(val, false);
    if (d.users_without_training > 0)
      std::cout << "note: " << d.users_without_training
                << " users have a single interaction: it is their held-out item and they have no training positive\n";
    std::cout << "wrote " << output << " in " << std::fixed << std::setprecision(1) << clock.elapsed() << " s with "
              << ranks.size << " rank" << (ranks.size == 1 ? "" : "s") << "\n";
  });
}

}  // namespace

Ranks::Ranks() {
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
}

void require_range(const std::string& command, const char* option, int64_t value, int64_t min, int64_t max,
                   const std::string& why) {
  if (value < min || value > max)
    throw UsageError(command + ": --" + option + " " + std::to_string(value) + " is out of range [" +
                     std::to_string(min) + ", " + std::to_string(max) + "]" + why);
}

void print_manifest_line(const std::optional<data::Manifest>& manifest) {
  std::cout << "  manifest "
            << (manifest ? manifest->path + " (sizes match; 'scaletrain-data verify' checks the checksums)"
                         : std::string("none (sizes and checksums unknown; 'scaletrain-data manifest' writes one)"))
            << "\n";
}

Json shards_json(const std::vector<std::string>& paths, const std::vector<int64_t>& rows) {
  Json shards = Json::array();
  for (std::size_t i = 0; i < paths.size(); ++i) {
    Json o = Json::object();
    o.set("path", paths[i]);
    o.set("rows", rows[i]);
    shards.push_back(o);
  }
  return shards;
}

void print_unchecked_shards(const std::vector<std::string>& unchecked) {
  if (unchecked.empty()) return;
  std::cout << "  unchecked: " << unchecked.size() << " shard" << (unchecked.size() == 1 ? " has" : "s have")
            << " HDF5 metadata without checksums and no manifest entry (see docs/reliability.md, Unchecked shards)\n";
  for (const std::string& path : unchecked) std::cout << "    " << path << "\n";
}

void print_recommendation_split(const data::RecommendationSplit& s, bool shards) {
  std::cout << "split " << std::filesystem::path(s.dir).filename().string() << ": task " << data::kTaskRecommendation
            << ", " << s.num_users << " users, " << s.num_items << " items, ";
  if (s.is_evaluation())
    std::cout << s.rows() << " held-out positives (one per user), " << s.negatives_per_user << " negatives per user";
  else
    std::cout << s.rows() << " positives";
  std::cout << " in " << s.shards.size() << " shard" << (s.shards.size() == 1 ? "" : "s") << "\n";
  print_manifest_line(s.manifest);
  if (shards)
    for (std::size_t i = 0; i < s.shards.size(); ++i)
      std::cout << "  " << s.shards[i] << "  " << s.shard_rows[i] << (s.is_evaluation() ? " users\n" : " positives\n");
  print_unchecked_shards(s.unchecked_shards);
}

Json recommendation_split_json(const data::RecommendationSplit& s) {
  Json j = Json::object();
  j.set("dir", s.dir);
  j.set("task", data::kTaskRecommendation);
  j.set("num_users", s.num_users);
  j.set("num_items", s.num_items);
  j.set("rows", s.rows());
  j.set("positives", s.is_evaluation() ? Json() : Json(s.rows()));
  j.set("negatives_per_user", s.is_evaluation() ? Json(s.negatives_per_user) : Json());
  j.set("manifest", s.manifest ? Json(s.manifest->path) : Json());
  j.set("shards", shards_json(s.shards, s.shard_rows));
  j.set("unchecked_shards", Json::array_of(s.unchecked_shards));
  return j;
}

int convert_movielens_main(int argc, char** argv) {
  std::string source, output;
  int64_t shards = 1, eval_negatives = data::kDefaultEvalNegatives;
  uint64_t seed = 0;
  bool overwrite = false;
  po::options_description desc("options");
  desc.add_options()("help,h", "print this help")(
      "source", po::value(&source)->required(),
      "directory with ml-20m's ratings.csv or ml-1m's ratings.dat (an unpacked MovieLens archive)")(
      "output", po::value(&output)->required(),
      "dataset directory to write: OUTPUT/train (training positives) and OUTPUT/val (held-out item and "
      "negatives per user)")("shards", po::value(&shards)->default_value(shards),
                             "shards per split (at most one per positive / per user)")(
      "eval-negatives", po::value(&eval_negatives)->default_value(eval_negatives),
      "distinct negatives each held-out item is ranked against (MLPerf's NCF: 999)")(
      "seed", po::value(&seed)->default_value(seed), "seed of the evaluation negatives")(
      "overwrite", po::bool_switch(&overwrite), "replace shards already in OUTPUT/train and OUTPUT/val");
  po::variables_map vm;
  if (!parse_data_command("convert movielens", argc, argv, desc, vm, "--source DIR --output DIR [options]")) return 0;
  require_range("convert movielens", "shards", shards, 1, 1000000);
  require_range("convert movielens", "eval-negatives", eval_negatives, 1, INT32_MAX);

  Stopwatch clock;
  const data::Ratings ratings = data::read_movielens_ratings(source);
  int64_t users = 0, items = 0;
  std::vector<data::Interaction> dense = data::remap_dense(ratings.interactions, users, items);
  const int64_t most = items - 1;  // a user with one positive leaves this many candidates
  if (eval_negatives > most)
    throw UsageError("convert movielens: --eval-negatives " + std::to_string(eval_negatives) + " is more than the " +
                     std::to_string(most) + " non-positive items even a user with one rating has (" +
                     std::to_string(items) + " items in " + ratings.file + ")");
  const data::RecommendationData d = data::leave_one_out(users, items, std::move(dense), eval_negatives, seed);
  write_and_report(d, output, shards, overwrite, clock);
  return 0;
}

int synthetic_recommendation_main(int argc, char** argv) {
  std::string task, output;
  int64_t users = 0, items = 0, groups = 10, positives = 20, shards = 1, eval_negatives = data::kDefaultEvalNegatives;
  uint64_t seed = 0;
  bool overwrite = false;
  po::options_description desc("options");
  desc.add_options()("help,h", "print this help")("task", po::value(&task)->required(), "recommendation")(
      "users", po::value(&users)->required(), "users U")("items", po::value(&items)->required(), "items I")(
      "groups", po::value(&groups)->default_value(groups),
      "latent groups G: user u and item i belong to groups u mod G and i mod G")(
      "positives-per-user", po::value(&positives)->default_value(positives),
      "distinct positives per user, 90% drawn from its group's items; the last is held out")(
      "eval-negatives", po::value(&eval_negatives)->default_value(eval_negatives),
      "distinct negatives per held-out item (at most I - positives-per-user)")(
      "shards", po::value(&shards)->default_value(shards), "shards per split")("output", po::value(&output)->required(),
                                                                               "dataset directory to write")(
      "seed", po::value(&seed)->default_value(seed), "the data depends only on the seed, not on shards or ranks")(
      "overwrite", po::bool_switch(&overwrite), "replace shards already in OUTPUT/train and OUTPUT/val");
  po::variables_map vm;
  if (!parse_data_command("synthetic", argc, argv, desc, vm,
                          "--task recommendation --users U --items I --output DIR [options]"))
    return 0;
  const char* cmd = "synthetic --task recommendation";
  require_range(cmd, "users", users, 1, INT32_MAX);
  require_range(cmd, "items", items, 2, INT32_MAX);
  require_range(cmd, "groups", groups, 1, items);
  require_range(
      cmd, "positives-per-user", positives, 2, items / groups / 2,
      " (at least one to train on and the held-out one; at most half of a group's items, items / groups / 2)");
  require_range(cmd, "eval-negatives", eval_negatives, 1, items - positives,
                " (distinct items that are none of a user's positives: at most items - positives-per-user)");
  require_range(cmd, "shards", shards, 1, 1000000);
  Stopwatch clock;
  const data::RecommendationData d =
      data::synthetic_recommendation(users, items, groups, positives, eval_negatives, seed);
  write_and_report(d, output, shards, overwrite, clock);
  return 0;
}

}  // namespace scaletrain::cli
