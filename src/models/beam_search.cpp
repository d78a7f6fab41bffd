// Beam search (include/scaletrain/models/beam_search.hpp): the reference's beam_search.py step by
// step, per sentence, on the host. Names follow the reference's (_grow_alive_seq,
// _get_new_alive_state, _get_new_finished_state, _continue_search).
#include "scaletrain/models/beam_search.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "scaletrain/core/error.hpp"

namespace scaletrain::models {

double length_normalization(double alpha, int64_t length) {
  return std::pow((5.0 + static_cast<double>(length)) / 6.0, alpha);
}

namespace {

constexpr double kMinusInfinity = -std::numeric_limits<double>::infinity();

// The positions of the k largest values, largest first, the lower tie-break key first among equal
// values (tf.nn.top_k: "the lower-index element appears first").
std::vector<int64_t> top_k(const std::vector<double>& values, const std::vector<int64_t>& tie_break, int64_t k) {
  std::vector<int64_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  k = std::min<int64_t>(k, static_cast<int64_t>(order.size()));
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
    return values[a] > values[b] || (values[a] == values[b] && tie_break[a] < tie_break[b]);
  });
  order.resize(static_cast<std::size_t>(k));
  return order;
}

std::vector<int64_t> positions(int64_t n) {
  std::vector<int64_t> p(static_cast<std::size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  return p;
}

// log(sum(exp(row))) in float64, the row's maximum taken out first (reduce_logsumexp).
double log_sum_exp(const float* row, int64_t v) {
  const double top = *std::max_element(row, row + v);
  double sum = 0.0;
  for (int64_t i = 0; i < v; ++i) sum += std::exp(static_cast<double>(row[i]) - top);
  return top + std::log(sum);
}

// The ids of the k largest logits of a row, largest first, the lower id first among equal ones:
// one pass, keeping the best k so far.
std::vector<int64_t> row_top(const float* row, int64_t v, int64_t k) {
  std::vector<int64_t> best;
  for (int64_t i = 0; i < v; ++i) {
    if (static_cast<int64_t>(best.size()) == k && !(row[i] > row[best.back()])) continue;
    auto at = std::upper_bound(best.begin(), best.end(), i, [&](int64_t a, int64_t b) { return row[a] > row[b]; });
    best.insert(at, i);
    if (static_cast<int64_t>(best.size()) > k) best.pop_back();
  }
  return best;
}

// The 2k best extensions of the alive sequences (_grow_alive_seq).
struct Grown {
  std::vector<std::vector<int32_t>> seq;  // the alive sequence it grew from, then its new id
  std::vector<double> log_probs;
  std::vector<int64_t> beams;  // the alive beam it grew from
};

// One sentence's search state (the reference's state, one batch entry of it).
struct Search {
  int64_t max_length = 0;
  std::vector<std::vector<int32_t>> alive_seq;  // the start id 0 first
  std::vector<double> alive_log_probs;
  std::vector<std::vector<int32_t>> finished_seq;  // as long as the alive ones, 0-padded
  std::vector<double> finished_scores;
  std::vector<char> finished_flags;

  Search(int64_t k, int64_t max_decode_length)
      : max_length(max_decode_length),
        alive_seq(static_cast<std::size_t>(k), std::vector<int32_t>{0}),
        alive_log_probs(static_cast<std::size_t>(k), kMinusInfinity),
        finished_seq(static_cast<std::size_t>(k), std::vector<int32_t>{0}),
        finished_scores(static_cast<std::size_t>(k), -kBeamSearchInf),
        finished_flags(static_cast<std::size_t>(k), 0) {
    alive_log_probs[0] = 0.0;  // only the first beam is live at first: the others would repeat it
  }

  // logits: the k rows of this sentence's alive beams, V each.
  Grown grow(const float* logits, int64_t v) const {
    const int64_t k = static_cast<int64_t>(alive_seq.size()), keep = 2 * k;
    // Each beam's own best `keep` candidates hold the sentence's best `keep`; within a row the
    // order of the log probabilities is the logits' order. (A beam at -inf, at the first step,
    // has only ties, which the lower ids win; they matter only where V < 2k.)
    std::vector<double> values;
    std::vector<int64_t> flat;
    for (int64_t b = 0; b < k; ++b) {
      const float* row = logits + b * v;
      const double lse = log_sum_exp(row, v);
      std::vector<int64_t> ids = row_top(row, v, keep);
      if (alive_log_probs[b] == kMinusInfinity) std::iota(ids.begin(), ids.end(), 0);
      for (int64_t i : ids) {
        values.push_back((static_cast<double>(row[i]) - lse) + alive_log_probs[b]);
        flat.push_back(b * v + i);
      }
    }
    Grown g;
    for (int64_t j : top_k(values, flat, keep)) {
      const int64_t beam = flat[j] / v;
      g.seq.push_back(alive_seq[beam]);
      g.seq.back().push_back(static_cast<int32_t>(flat[j] % v));
      g.log_probs.push_back(values[j]);
      g.beams.push_back(beam);
    }
    return g;
  }

  // The new alive sequences (_get_new_alive_state); returns the beam each grew from.
  std::vector<int64_t> keep_alive(const Grown& g, int32_t eos) {
    const int64_t k = static_cast<int64_t>(alive_seq.size()), n = static_cast<int64_t>(g.seq.size());
    std::vector<double> values(g.log_probs);
    for (int64_t j = 0; j < n; ++j)
      if (g.seq[j].back() == eos) values[j] += -kBeamSearchInf;
    std::vector<int64_t> origins;
    std::vector<std::vector<int32_t>> seq;
    std::vector<double> log_probs;
    for (int64_t j : top_k(values, positions(n), k)) {
      seq.push_back(g.seq[j]);
      log_probs.push_back(values[j]);
      origins.push_back(g.beams[j]);
    }
    alive_seq.swap(seq);
    alive_log_probs.swap(log_probs);
    return origins;
  }

  // The new finished sequences (_get_new_finished_state) after step i.
  void keep_finished(const Grown& g, int64_t i, double alpha, int32_t eos) {
    const int64_t k = static_cast<int64_t>(finished_seq.size());
    std::vector<std::vector<int32_t>> seq(finished_seq);
    for (auto& s : seq) s.push_back(0);  // the reference pads the finished ones to the new length
    std::vector<double> scores(finished_scores);
    std::vector<char> flags(finished_flags);
    const double norm = length_normalization(alpha, i + 1);
    for (std::size_t j = 0; j < g.seq.size(); ++j) {
      const bool ended = g.seq[j].back() == eos;
      seq.push_back(g.seq[j]);
      scores.push_back(g.log_probs[j] / norm + (ended ? 0.0 : -kBeamSearchInf));
      flags.push_back(ended ? 1 : 0);
    }
    std::vector<std::vector<int32_t>> top_seq;
    std::vector<double> top_scores;
    std::vector<char> top_flags;
    for (int64_t j : top_k(scores, positions(static_cast<int64_t>(scores.size())), k)) {
      top_seq.push_back(std::move(seq[j]));
      top_scores.push_back(scores[j]);
      top_flags.push_back(flags[j]);
    }
    finished_seq.swap(top_seq);
    finished_scores.swap(top_scores);
    finished_flags.swap(top_flags);
  }

  bool any_finished() const {
    return std::any_of(finished_flags.begin(), finished_flags.end(), [](char f) { return f; });
  }

  // _continue_search before step i.
  bool goes_on(int64_t i, double alpha) const {
    if (i >= max_length) return false;
    const double best_alive = alive_log_probs[0] / length_normalization(alpha, max_length);
    // Fillers count 0 (the reference multiplies the scores by the flags), then -INF where none is real.
    double lowest = std::numeric_limits<double>::infinity();
    for (std::size_t j = 0; j < finished_scores.size(); ++j)
      lowest = std::min(lowest, finished_flags[j] ? finished_scores[j] : 0.0);
    if (!any_finished()) lowest += -kBeamSearchInf;
    return !(lowest > best_alive);
  }

  BeamSearchResult result(int32_t eos) const {
    const bool finished = any_finished();
    const std::vector<int32_t>& seq = finished ? finished_seq[0] : alive_seq[0];
    BeamSearchResult r;
    r.finished = finished;
    r.score = finished ? finished_scores[0] : alive_log_probs[0];
    const auto end = std::find(seq.begin() + 1, seq.end(), eos);
    r.ids.assign(seq.begin() + 1, end);
    return r;
  }
};

}  // namespace

std::vector<BeamSearchResult> beam_search(BeamSearchDecoder& decoder, const std::vector<int64_t>& max_decode_lengths,
                                          const BeamSearchOptions& o) {
  const int64_t k = o.beam_size, n = static_cast<int64_t>(max_decode_lengths.size());
  ST_CHECK(k >= 1, "beam search: the beam size must be at least 1, got " << k);
  ST_CHECK(std::isfinite(o.alpha) && o.alpha >= 0, "beam search: the length penalty must be >= 0, got " << o.alpha);
  std::vector<Search> searches;
  std::vector<BeamSearchResult> results(static_cast<std::size_t>(n));
  std::vector<int64_t> live, origins;
  for (int64_t s = 0; s < n; ++s) {
    searches.emplace_back(k, max_decode_lengths[s]);
    if (searches[s].goes_on(0, o.alpha)) {
      for (int64_t b = 0; b < k; ++b) origins.push_back(s * k + b);
      live.push_back(s);
    } else {
      results[s] = searches[s].result(o.eos_id);
    }
  }
  if (!live.empty() && static_cast<int64_t>(live.size()) != n) decoder.keep_rows(origins);
  for (int64_t i = 0; !live.empty(); ++i) {
    std::vector<int32_t> last_ids;
    for (int64_t s : live)
      for (const auto& seq : searches[s].alive_seq) last_ids.push_back(seq.back());
    const Tensor logits = decoder.next_logits(last_ids);
    ST_CHECK(logits.ndim() == 2 && logits.dim(0) == static_cast<int64_t>(last_ids.size()) && logits.dim(1) >= 2,
             "beam search: logits " << shape_string(logits.shape()) << " for " << last_ids.size() << " rows");
    const int64_t v = logits.dim(1), sentences = static_cast<int64_t>(live.size());
    // The log-softmax over the vocabulary is the step's host work (rows x V): the sentences'
    // candidates are independent, so their threads take them.
    std::vector<Grown> grown(live.size());
    const float* rows = logits.data<float>();
#pragma omp parallel for schedule(dynamic)
    for (int64_t pos = 0; pos < sentences; ++pos) grown[pos] = searches[live[pos]].grow(rows + pos * k * v, v);
    std::vector<int64_t> still_live;
    origins.clear();
    for (std::size_t pos = 0; pos < live.size(); ++pos) {
      Search& search = searches[live[pos]];
      const std::vector<int64_t> beams = search.keep_alive(grown[pos], o.eos_id);
      search.keep_finished(grown[pos], i, o.alpha, o.eos_id);
      if (search.goes_on(i + 1, o.alpha)) {
        for (int64_t b : beams) origins.push_back(static_cast<int64_t>(pos) * k + b);
        still_live.push_back(live[pos]);
      } else {
        results[live[pos]] = search.result(o.eos_id);
      }
    }
    live.swap(still_live);
    if (!live.empty()) decoder.keep_rows(origins);
  }
  return results;
}

}  // namespace scaletrain::models
