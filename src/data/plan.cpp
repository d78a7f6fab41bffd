// The epoch plan (see plan.hpp for the definition of every mode). Each rank builds the whole
// epoch order (O(N) integers, ~10 MB for ImageNet, well under a second) and keeps its slice:
// the same computation everywhere needs no communication.
#include "scaletrain/data/plan.hpp"

#include <numeric>

#include "scaletrain/core/error.hpp"
#include "scaletrain/core/rng.hpp"

namespace scaletrain::data {
namespace {
// Stream salts so that the shuffles and the augmentation never share random numbers.
constexpr uint64_t kShuffleSalt = 0x5348554646ULL;  // "SHUFF" (kept: the global order of issue 2)
constexpr uint64_t kShardSalt = 0x5348415244ULL;    // "SHARD"
constexpr uint64_t kBufferSalt = 0x425546ULL;       // "BUF"

// First position (in the epoch order, extended cyclically with pad_last) and length of the slice.
std::pair<int64_t, int64_t> slice(int64_t total, int rank, int world, const LoaderOptions& o) {
  const int64_t b = o.batch_size;
  if (o.pad_last) {
    const int64_t per = (total + world - 1) / world;
    const int64_t m = (per + b - 1) / b * b;
    return {rank * m, m};
  }
  const int64_t per = total / world, extra = total % world;
  if (o.drop_last) return {rank * per, per / b * b};
  return {rank * per + std::min<int64_t>(rank, extra), per + (rank < extra ? 1 : 0)};
}

void fisher_yates(std::vector<int64_t>& v, Rng& rng) {
  for (int64_t i = static_cast<int64_t>(v.size()) - 1; i > 0; --i) std::swap(v[i], v[rng.below(i + 1)]);
}
}  // namespace

void check_plan_options(int rank, int world, const LoaderOptions& o) {
  ST_CHECK(world > 0 && rank >= 0 && rank < world, "loader: rank " << rank << " of " << world << " ranks");
  ST_CHECK(o.batch_size > 0, "batch size must be positive, got " << o.batch_size);
  ST_CHECK(o.shuffle_mode == "global" || o.shuffle_mode == "shard",
           "--shuffle must be 'global' or 'shard', got '" << o.shuffle_mode << "'");
  ST_CHECK(o.shuffle_mode != "shard" || o.shuffle_buffer > 0,
           "--shuffle-buffer must be positive, got " << o.shuffle_buffer);
}

int64_t planned_samples(int64_t total, int rank, int world, const LoaderOptions& o) {
  check_plan_options(rank, world, o);
  return total > 0 ? slice(total, rank, world, o).second : 0;
}

std::vector<int64_t> plan_epoch(const std::vector<int64_t>& shard_sizes, int rank, int world, const LoaderOptions& o,
                                int epoch) {
  check_plan_options(rank, world, o);
  const int64_t total = std::accumulate(shard_sizes.begin(), shard_sizes.end(), int64_t(0));
  if (total == 0) return {};
  const auto [begin, count] = slice(total, rank, world, o);
  const uint64_t ep = static_cast<uint64_t>(epoch);

  // The epoch order over all samples.
  std::vector<int64_t> order(total);
  std::iota(order.begin(), order.end(), int64_t(0));
  const bool shard_mode = o.shuffle && o.shuffle_mode == "shard";
  if (o.shuffle && !shard_mode) {
    Rng rng = Rng::derive(o.seed ^ kShuffleSalt, ep);
    fisher_yates(order, rng);
  } else if (shard_mode) {
    std::vector<int64_t> first(shard_sizes.size() + 1, 0), shards(shard_sizes.size());
    for (std::size_t s = 0; s < shard_sizes.size(); ++s) first[s + 1] = first[s] + shard_sizes[s];
    std::iota(shards.begin(), shards.end(), int64_t(0));
    Rng rng = Rng::derive(o.seed ^ kShardSalt, ep);
    fisher_yates(shards, rng);
    int64_t at = 0;
    for (int64_t s : shards)
      for (int64_t i = first[s]; i < first[s + 1]; ++i) order[at++] = i;
  }

  std::vector<int64_t> ids(count);
  for (int64_t i = 0; i < count; ++i) ids[i] = order[(begin + i) % total];
  if (!shard_mode) return ids;

  // Buffer shuffle of the slice.
  Rng rng = Rng::derive(o.seed ^ kBufferSalt, ep, static_cast<uint64_t>(rank));
  const int64_t size = std::min<int64_t>(o.shuffle_buffer, count);
  std::vector<int64_t> buffer(ids.begin(), ids.begin() + size), out;
  out.reserve(count);
  for (int64_t next = size; !buffer.empty();) {
    const int64_t j = static_cast<int64_t>(rng.below(buffer.size()));
    out.push_back(buffer[j]);
    if (next < count) {
      buffer[j] = ids[next++];
    } else {
      buffer[j] = buffer.back();
      buffer.pop_back();
    }
  }
  return out;
}

}  // namespace scaletrain::data
