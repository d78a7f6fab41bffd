// Uniform negatives over each user's non-positive items. Two exact ways to draw one:
//   - rejection: an item uniform in [0, num_items), redrawn while it is a positive (binary search
//     in the user's sorted list); used while at most half of the items are positives, so the
//     expected number of draws stays below 2;
//   - by rank: r uniform in [0, num_items - count) mapped to the r-th non-positive item, for the
//     few users who have interacted with most items (rejection would spin).
// Both give every non-positive item probability 1 / (num_items - count).
#include "scaletrain/data/negative_sampler.hpp"

#include <algorithm>

#include "scaletrain/core/error.hpp"
#include "scaletrain/core/rng.hpp"

namespace scaletrain::data {
namespace {

// Tag of the evaluation negatives' streams, so that they never coincide with a training stream
// drawn from the same seed (training uses (seed, epoch, index)).
constexpr uint64_t kEvalStreamTag = 0x65766e6567ULL;  // "evneg"

int32_t draw_negative(const UserPositives& p, int32_t user, Rng& rng) {
  const int64_t items = p.num_items(), count = p.count(user);
  if (2 * count <= items) {
    for (;;) {
      const auto item = static_cast<int32_t>(rng.below(static_cast<uint64_t>(items)));
      if (!p.contains(user, item)) return item;
    }
  }
  return p.nth_non_positive(user, static_cast<int64_t>(rng.below(static_cast<uint64_t>(items - count))));
}

}  // namespace

UserPositives::UserPositives(int64_t num_users, int64_t num_items, const int32_t* user, const int32_t* item, int64_t n)
    : num_users_(num_users), num_items_(num_items), start_(static_cast<std::size_t>(num_users) + 1, 0) {
  ST_CHECK(num_users > 0 && num_items > 0,
           "positives: num_users = " << num_users << " and num_items = " << num_items << " must be positive");
  for (int64_t i = 0; i < n; ++i) {
    ST_CHECK(user[i] >= 0 && user[i] < num_users,
             "positives: user " << user[i] << " of positive " << i << " is out of range [0, " << num_users << ")");
    ST_CHECK(item[i] >= 0 && item[i] < num_items,
             "positives: item " << item[i] << " of positive " << i << " is out of range [0, " << num_items << ")");
    ++start_[user[i] + 1];
  }
  for (int64_t u = 0; u < num_users; ++u) start_[u + 1] += start_[u];
  std::vector<int64_t> fill(start_.begin(), start_.end() - 1);
  items_.resize(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) items_[fill[user[i]]++] = item[i];
  // Sort each user's list and drop repeats, compacting in place.
  int64_t out = 0;
  for (int64_t u = 0; u < num_users; ++u) {
    const auto b = items_.begin() + start_[u], e = items_.begin() + start_[u + 1];
    std::sort(b, e);
    const auto last = std::unique(b, e);
    start_[u] = out;
    out = std::copy(b, last, items_.begin() + out) - items_.begin();
  }
  start_[num_users] = out;
  items_.resize(static_cast<std::size_t>(out));
}

bool UserPositives::contains(int32_t user, int32_t item) const {
  return std::binary_search(begin(user), end(user), item);
}

int32_t UserPositives::nth_non_positive(int32_t user, int64_t r) const {
  // With the sorted positives p[j], p[j] - j counts the non-positives below p[j] (non-decreasing
  // in j). The answer is r plus the number of positives j with p[j] - j <= r.
  const int32_t* p = begin(user);
  int64_t lo = 0, hi = count(user);
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (p[mid] - mid <= r)
      lo = mid + 1;
    else
      hi = mid;
  }
  return static_cast<int32_t>(r + lo);
}

NegativeSampler::NegativeSampler(const UserPositives& positives, int negatives_per_positive, uint64_t seed)
    : positives_(positives), per_positive_(negatives_per_positive), seed_(seed) {
  ST_CHECK(negatives_per_positive > 0,
           "negative sampler: negatives per positive must be at least 1, got " << negatives_per_positive);
  for (int64_t u = 0; u < positives.num_users(); ++u)
    ST_CHECK(positives.count(static_cast<int32_t>(u)) < positives.num_items(),
             "negative sampler: user " << u << " has interacted with all " << positives.num_items()
                                       << " items, so it has no negative to draw; remove the user from the "
                                          "training data");
}

void NegativeSampler::sample(int64_t epoch, int64_t index, int32_t user, int32_t* out) const {
  ST_CHECK(user >= 0 && user < positives_.num_users(), "negative sampler: user " << user << " of positive " << index
                                                                                 << " is out of range [0, "
                                                                                 << positives_.num_users() << ")");
  Rng rng = Rng::derive(seed_, static_cast<uint64_t>(epoch), static_cast<uint64_t>(index));
  for (int j = 0; j < per_positive_; ++j) out[j] = draw_negative(positives_, user, rng);
}

void NegativeSampler::sample_range(int64_t epoch, int64_t begin, int64_t end, const int32_t* users,
                                   int32_t* out) const {
  for (int64_t i = begin; i < end; ++i) sample(epoch, i, users[i - begin], out + (i - begin) * per_positive_);
}

std::vector<int32_t> sample_eval_negatives(const UserPositives& positives, int64_t k, uint64_t seed) {
  ST_CHECK(k > 0, "evaluation negatives: k must be at least 1, got " << k);
  const int64_t items = positives.num_items();
  std::vector<int32_t> out(static_cast<std::size_t>(positives.num_users() * k));
  std::vector<char> taken(static_cast<std::size_t>(items), 0);
  std::vector<int32_t> pool;
  for (int64_t u = 0; u < positives.num_users(); ++u) {
    const auto user = static_cast<int32_t>(u);
    const int64_t available = items - positives.count(user);
    ST_CHECK(available >= k, "evaluation negatives: user " << u << " has " << positives.count(user) << " positives of "
                                                           << items << " items, leaving " << available
                                                           << " non-positive items for the " << k
                                                           << " distinct negatives requested (lower --eval-negatives)");
    Rng rng = Rng::derive(seed, static_cast<uint64_t>(u), kEvalStreamTag);
    int32_t* row = out.data() + u * k;
    if (available <= 2 * k) {
      // Few candidates: a partial Fisher-Yates shuffle of all of them.
      pool.resize(static_cast<std::size_t>(available));
      for (int64_t r = 0; r < available; ++r) pool[r] = positives.nth_non_positive(user, r);
      for (int64_t j = 0; j < k; ++j) {
        std::swap(pool[j], pool[j + static_cast<int64_t>(rng.below(static_cast<uint64_t>(available - j)))]);
        row[j] = pool[j];
      }
      continue;
    }
    // Many candidates: draw by rank, redraw repeats (fewer than half of the candidates are taken).
    for (int64_t j = 0; j < k;) {
      const int32_t item = positives.nth_non_positive(user, static_cast<int64_t>(rng.below(available)));
      if (taken[item]) continue;
      taken[item] = 1;
      row[j++] = item;
    }
    for (int64_t j = 0; j < k; ++j) taken[row[j]] = 0;
  }
  return out;
}

}  // namespace scaletrain::data
