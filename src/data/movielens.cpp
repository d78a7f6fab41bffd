// MovieLens ratings files and NCF's leave-one-out split. Every rating is a positive whatever its
// value (implicit feedback, as in He et al. 2017 and MLPerf's NCF reference).
#include "scaletrain/data/movielens.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "scaletrain/core/error.hpp"
#include "scaletrain/core/rng.hpp"
#include "scaletrain/data/negative_sampler.hpp"

namespace scaletrain::data {
namespace fs = std::filesystem;

namespace {

constexpr const char* kCsvHeader = "userId,movieId,rating,timestamp";

// Splits `line` at every `sep` (a string: "," or "::").
std::vector<std::string> split_fields(const std::string& line, const std::string& sep) {
  std::vector<std::string> out;
  std::size_t at = 0;
  for (;;) {
    const std::size_t next = line.find(sep, at);
    out.push_back(line.substr(at, next == std::string::npos ? std::string::npos : next - at));
    if (next == std::string::npos) return out;
    at = next + sep.size();
  }
}

bool parse_int(const std::string& s, int64_t& v) {
  const char* end = s.data() + s.size();
  const auto r = std::from_chars(s.data(), end, v);
  return !s.empty() && r.ec == std::errc() && r.ptr == end;
}

bool parse_number(const std::string& s) {
  if (s.empty()) return false;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

// One data line: user, item, rating (checked, then dropped: implicit feedback), timestamp.
Interaction parse_rating(const std::string& file, int64_t number, const std::string& line, const std::string& sep,
                         const char* layout) {
  const std::vector<std::string> f = split_fields(line, sep);
  Interaction r;
  r.line = number;
  ST_CHECK(f.size() == 4 && parse_int(f[0], r.user) && parse_int(f[1], r.item) && parse_number(f[2]) &&
               parse_int(f[3], r.timestamp),
           file << ":" << number << ": malformed rating '" << line << "' (expected " << layout << ")");
  return r;
}

// Dense ids of `ids` in increasing order of value: sorted distinct values; id -> its index.
std::vector<int64_t> sorted_distinct(std::vector<int64_t> ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

int64_t dense_id(const std::vector<int64_t>& sorted, int64_t id) {
  return std::lower_bound(sorted.begin(), sorted.end(), id) - sorted.begin();
}

// The later of two interactions: by timestamp, then by line.
bool earlier(const Interaction& a, const Interaction& b) {
  return a.timestamp != b.timestamp ? a.timestamp < b.timestamp : a.line < b.line;
}

}  // namespace

Ratings read_movielens_ratings(const std::string& dir) {
  const fs::path csv = fs::path(dir) / "ratings.csv", dat = fs::path(dir) / "ratings.dat";
  std::error_code ec;
  const bool is_csv = fs::is_regular_file(csv, ec);
  ST_CHECK(is_csv || fs::is_regular_file(dat, ec),
           dir << ": neither ratings.csv (ml-20m) nor ratings.dat (ml-1m) found; --source must be the directory "
                  "of an unpacked MovieLens archive (e.g. ml-20m/)");
  Ratings out;
  out.file = (is_csv ? csv : dat).string();
  std::ifstream in(out.file);
  ST_CHECK(in, out.file << ": cannot open for reading");
  const std::string sep = is_csv ? "," : "::";
  const char* layout = is_csv ? "userId,movieId,rating,timestamp with integer ids and timestamp"
                              : "UserID::MovieID::Rating::Timestamp with integer ids and timestamp";
  std::string line;
  int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (is_csv && number == 1) {
      ST_CHECK(line == kCsvHeader, out.file << ":1: expected the header '" << kCsvHeader << "', got '" << line << "'");
      continue;
    }
    if (line.empty()) continue;  // a trailing blank line
    out.interactions.push_back(parse_rating(out.file, number, line, sep, layout));
  }
  ST_CHECK(!in.bad(), out.file << ": read error after line " << number);
  ST_CHECK(!out.interactions.empty(), out.file << ": holds no ratings");
  return out;
}

std::vector<Interaction> remap_dense(const std::vector<Interaction>& ratings, int64_t& num_users, int64_t& num_items) {
  std::vector<int64_t> users, items;
  users.reserve(ratings.size());
  items.reserve(ratings.size());
  for (const Interaction& r : ratings) {
    users.push_back(r.user);
    items.push_back(r.item);
  }
  users = sorted_distinct(std::move(users));
  items = sorted_distinct(std::move(items));
  ST_CHECK(users.size() <= INT32_MAX && items.size() <= INT32_MAX, "ratings: more than 2^31 - 1 users or items");
  num_users = static_cast<int64_t>(users.size());
  num_items = static_cast<int64_t>(items.size());
  std::vector<Interaction> out(ratings);
  for (Interaction& r : out) {
    r.user = dense_id(users, r.user);
    r.item = dense_id(items, r.item);
  }
  return out;
}

RecommendationData leave_one_out(int64_t num_users, int64_t num_items, std::vector<Interaction> interactions,
                                 int64_t eval_negatives, uint64_t seed) {
  // By user, then item, then time: a repeated (user, item) keeps its last interaction.
  std::sort(interactions.begin(), interactions.end(), [](const Interaction& a, const Interaction& b) {
    if (a.user != b.user) return a.user < b.user;
    if (a.item != b.item) return a.item < b.item;
    return earlier(a, b);
  });
  std::vector<Interaction> unique;
  unique.reserve(interactions.size());
  for (std::size_t i = 0; i < interactions.size(); ++i) {
    const bool repeated = i + 1 < interactions.size() && interactions[i + 1].user == interactions[i].user &&
                          interactions[i + 1].item == interactions[i].item;
    if (!repeated) unique.push_back(interactions[i]);
  }
  // By user, then time: the last of each user's run is its held-out item.
  std::sort(unique.begin(), unique.end(), [](const Interaction& a, const Interaction& b) {
    return a.user != b.user ? a.user < b.user : earlier(a, b);
  });
  RecommendationData d;
  d.num_users = num_users;
  d.num_items = num_items;
  d.heldout_item.assign(static_cast<std::size_t>(num_users), -1);
  std::vector<int32_t> all_user, all_item;
  for (std::size_t i = 0; i < unique.size(); ++i) {
    const Interaction& r = unique[i];
    ST_CHECK(r.user >= 0 && r.user < num_users && r.item >= 0 && r.item < num_items,
             "leave-one-out: interaction (" << r.user << ", " << r.item << ") is out of range");
    all_user.push_back(static_cast<int32_t>(r.user));
    all_item.push_back(static_cast<int32_t>(r.item));
    if (i + 1 == unique.size() || unique[i + 1].user != r.user) {
      d.heldout_item[r.user] = static_cast<int32_t>(r.item);
      if (i == 0 || unique[i - 1].user != r.user) ++d.users_without_training;
    } else {
      d.train_user.push_back(static_cast<int32_t>(r.user));
      d.train_item.push_back(static_cast<int32_t>(r.item));
    }
  }
  for (int64_t u = 0; u < num_users; ++u)
    ST_CHECK(d.heldout_item[u] >= 0, "leave-one-out: user " << u << " has no interaction to hold out");
  const UserPositives positives(num_users, num_items, all_user.data(), all_item.data(),
                                static_cast<int64_t>(all_user.size()));
  d.negatives_per_user = eval_negatives;
  d.negatives = sample_eval_negatives(positives, eval_negatives, seed);
  return d;
}

}  // namespace scaletrain::data

namespace scaletrain::data {
namespace {
// Tag of the synthetic users' streams, apart from the evaluation negatives' (same seed).
constexpr uint64_t kSyntheticStreamTag = 0x73796e726563ULL;  // "synrec"
}  // namespace

RecommendationData synthetic_recommendation(int64_t users, int64_t items, int64_t groups, int64_t positives_per_user,
                                            int64_t eval_negatives, uint64_t seed) {
  ST_CHECK(users > 0 && groups > 0 && groups <= items && positives_per_user > 0,
           "synthetic recommendation: need users > 0 and 0 < groups <= items, got " << users << ", " << groups << ", "
                                                                                    << items);
  // Group g holds items g, g + G, ...: n_g of them. Distinct draws need room in the smallest group.
  const int64_t smallest_group = items / groups;
  ST_CHECK(2 * positives_per_user <= smallest_group,
           "synthetic recommendation: " << positives_per_user << " positives per user need groups of at least "
                                        << 2 * positives_per_user << " items, but " << items << " items in " << groups
                                        << " groups leave " << smallest_group);
  std::vector<Interaction> interactions;
  interactions.reserve(static_cast<std::size_t>(users * positives_per_user));
  std::vector<int64_t> drawn;
  for (int64_t u = 0; u < users; ++u) {
    Rng rng = Rng::derive(seed, static_cast<uint64_t>(u), kSyntheticStreamTag);
    const int64_t g = u % groups;
    const int64_t in_group = (items - g + groups - 1) / groups;
    drawn.clear();
    while (static_cast<int64_t>(drawn.size()) < positives_per_user) {
      int64_t item;
      if (rng.uniform() < kSyntheticInGroup) {
        const double v = rng.uniform();
        item = g + static_cast<int64_t>(static_cast<double>(in_group) * v * v) * groups;
      } else {
        item = static_cast<int64_t>(rng.below(static_cast<uint64_t>(items)));
      }
      if (std::find(drawn.begin(), drawn.end(), item) != drawn.end()) continue;
      const int64_t order = static_cast<int64_t>(drawn.size());
      drawn.push_back(item);
      interactions.push_back({u, item, order, order});
    }
  }
  return leave_one_out(users, items, std::move(interactions), eval_negatives, seed);
}

}  // namespace scaletrain::data
