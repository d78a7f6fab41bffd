// The Transformer's decoding (models/transformer.hpp, models/beam_search.hpp):
//   - the incremental decoder's logits at every step equal the uncached decode()'s at that
//     position (a random transformer of width 32, sentences of source lengths 7, 4 and 1), also
//     with several beams a sentence whose rows keep_rows() reorders, repeats and drops;
//   - greedy translation on the cache gives the ids the old uncached loop (decode() of the whole
//     prefix each step, kept here) gives;
//   - beam search against a transliteration of the reference's beam_search.py kept here (batched,
//     the reference's global stopping rule, stable top-k): on a model of hashed prefixes with
//     quantised logits (ties everywhere), on the real model through decode(), and on a hand-made
//     case where beam search and greedy decoding part, with its early stop worked out by hand.
// tests/python/test_beam_search_reference.py checks translate_beam against a numpy port of the
// reference driven by PyTorch.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <vector>

#include "scaletrain/core/error.hpp"
#include "scaletrain/core/rng.hpp"
#include "scaletrain/models/beam_search.hpp"
#include "scaletrain/models/transformer.hpp"

using namespace scaletrain;
using namespace scaletrain::models;

namespace {

using Ids = std::vector<int32_t>;
constexpr int32_t kEos = 1;
constexpr double kInf = 1e7;  // beam_search.py's INF

TransformerConfig tiny() { return {"transformer-test", 32, 4, 64, 2, 0.1}; }

struct Sources {
  Tensor ids, lengths;  // (N, Ls) padded with 0, each ending in EOS; (N)
};

Sources random_sources(const std::vector<int32_t>& lengths, int64_t vocab, uint64_t seed) {
  Rng rng(seed);
  const int64_t n = static_cast<int64_t>(lengths.size()), ls = *std::max_element(lengths.begin(), lengths.end());
  Sources s{Tensor::zeros({n, ls}, DType::i32), Tensor::empty({n}, DType::i32)};
  for (int64_t i = 0; i < n; ++i) {
    for (int32_t l = 0; l + 1 < lengths[i]; ++l)
      s.ids.data<int32_t>()[i * ls + l] = 2 + static_cast<int32_t>(rng.below(vocab - 2));
    s.ids.data<int32_t>()[i * ls + lengths[i] - 1] = kEos;
    s.lengths.data<int32_t>()[i] = lengths[i];
  }
  return s;
}

// Rows `rows` of the sources (a sentence once per hypothesis), for decode() of hypotheses.
Sources pick(const Sources& s, const std::vector<int64_t>& rows) {
  const int64_t ls = s.ids.dim(1), n = static_cast<int64_t>(rows.size());
  Sources out{Tensor::zeros({n, ls}, DType::i32), Tensor::empty({n}, DType::i32)};
  for (int64_t r = 0; r < n; ++r) {
    std::copy_n(s.ids.data<int32_t>() + rows[r] * ls, ls, out.ids.data<int32_t>() + r * ls);
    out.lengths.data<int32_t>()[r] = s.lengths.data<int32_t>()[rows[r]];
  }
  return out;
}

// decode() of each row's prefix (its source, then the start and its tokens): the logits of the
// next token (rows, V), the whole prefix recomputed.
std::vector<std::vector<float>> uncached_next_logits(Context& ctx, Transformer& model, const Sources& s,
                                                     const std::vector<Ids>& prefixes) {
  const int64_t n = static_cast<int64_t>(prefixes.size()), t = static_cast<int64_t>(prefixes[0].size());
  Tensor target = Tensor::empty({n, t}, DType::i32);
  for (int64_t r = 0; r < n; ++r) std::copy(prefixes[r].begin(), prefixes[r].end(), target.data<int32_t>() + r * t);
  model.encode(ctx, s.ids, s.lengths, false);
  const Tensor logits = model.decode(ctx, target, false);
  std::vector<std::vector<float>> out;
  for (int64_t r = 0; r < n; ++r) {
    const float* row = logits.data<float>() + (r * t + t - 1) * model.vocab();
    out.emplace_back(row, row + model.vocab());
  }
  return out;
}

// Largest |a - b| over the largest |b| of a step's logits.
double relative_error(const Tensor& ours, const std::vector<std::vector<float>>& reference) {
  double err = 0, scale = 0;
  for (std::size_t r = 0; r < reference.size(); ++r)
    for (std::size_t v = 0; v < reference[r].size(); ++v) {
      err = std::max(err, std::abs(double(ours.data<float>()[r * reference[r].size() + v]) - reference[r][v]));
      scale = std::max(scale, std::abs(double(reference[r][v])));
    }
  return err / scale;
}

// The greedy loop translate_greedy ran before the cache: decode() of the whole prefix each step.
std::vector<Ids> uncached_greedy(Context& ctx, Transformer& model, const Sources& s, int64_t max_extra) {
  const int64_t n = s.ids.dim(0);
  std::vector<Ids> prefix(n, Ids{0}), out(n);
  std::vector<char> done(n, 0);
  for (int64_t t = 1; !std::all_of(done.begin(), done.end(), [](char d) { return d; }); ++t) {
    const auto logits = uncached_next_logits(ctx, model, s, prefix);
    for (int64_t i = 0; i < n; ++i) {
      const int32_t best =
          static_cast<int32_t>(std::max_element(logits[i].begin(), logits[i].end()) - logits[i].begin());
      prefix[i].push_back(best);
      if (done[i]) continue;
      if (best != kEos) out[i].push_back(best);
      if (best == kEos || t >= s.lengths.data<int32_t>()[i] + max_extra) done[i] = 1;
    }
  }
  return out;
}

// ---- the reference's beam_search.py, transliterated: whole arrays, one loop for the batch ----

// Logits (batch * beam rows, V) of the next token after each row's whole sequence (start id first).
using LogitsOfSequences = std::function<std::vector<std::vector<float>>(const std::vector<Ids>&)>;

struct ReferenceResult {
  Ids ids;  // finished_seq[:, 0] (or alive_seq), start id dropped, cut before the first EOS
  double score;
  int64_t steps;  // the loop's iterations
};

// tf.nn.top_k: the k largest, the lower index first among equals.
std::vector<int64_t> reference_top_k(const std::vector<double>& values, int64_t k) {
  std::vector<int64_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return values[a] > values[b]; });
  order.resize(k);
  return order;
}

double length_norm(double alpha, int64_t length) { return std::pow((5.0 + length) / 6.0, alpha); }

std::vector<ReferenceResult> reference_beam_search(const LogitsOfSequences& logits_fn, int64_t batch, int64_t beam,
                                                   double alpha, int64_t max_decode_length) {
  const double inf = std::numeric_limits<double>::infinity();
  using Seqs = std::vector<std::vector<Ids>>;  // [batch][beam]
  Seqs alive_seq(batch, std::vector<Ids>(beam, Ids{0})), finished_seq = alive_seq;
  std::vector<std::vector<double>> alive_log_probs(batch, std::vector<double>(beam, -inf));
  for (auto& a : alive_log_probs) a[0] = 0.0;
  std::vector<std::vector<double>> finished_scores(batch, std::vector<double>(beam, -kInf));
  std::vector<std::vector<char>> finished_flags(batch, std::vector<char>(beam, 0));
  int64_t i = 0;
  const auto continue_search = [&] {
    const double max_length_norm = length_norm(alpha, max_decode_length);
    bool all_done = true;
    for (int64_t b = 0; b < batch; ++b) {
      const double best_alive = alive_log_probs[b][0] / max_length_norm;
      double lowest = inf;
      bool any = false;
      for (int64_t j = 0; j < beam; ++j) {
        lowest = std::min(lowest, finished_scores[b][j] * (finished_flags[b][j] ? 1.0 : 0.0));
        any = any || finished_flags[b][j];
      }
      lowest += (1.0 - any) * -kInf;
      all_done = all_done && lowest > best_alive;
    }
    return i < max_decode_length && !all_done;
  };
  while (continue_search()) {
    std::vector<Ids> flat;
    for (const auto& s : alive_seq) flat.insert(flat.end(), s.begin(), s.end());
    const auto logits = logits_fn(flat);
    const int64_t v = static_cast<int64_t>(logits[0].size());
    for (int64_t b = 0; b < batch; ++b) {
      // _grow_alive_seq
      std::vector<double> log_probs;
      for (int64_t j = 0; j < beam; ++j) {
        const auto& row = logits[b * beam + j];
        const double top = *std::max_element(row.begin(), row.end());
        double sum = 0;
        for (float x : row) sum += std::exp(double(x) - top);
        for (float x : row) log_probs.push_back((double(x) - (top + std::log(sum))) + alive_log_probs[b][j]);
      }
      std::vector<Ids> topk_seq;
      std::vector<double> topk_log_probs;
      for (int64_t index : reference_top_k(log_probs, 2 * beam)) {
        topk_seq.push_back(alive_seq[b][index / v]);
        topk_seq.back().push_back(static_cast<int32_t>(index % v));
        topk_log_probs.push_back(log_probs[index]);
      }
      // _get_new_alive_state
      std::vector<double> new_log_probs = topk_log_probs;
      for (std::size_t j = 0; j < topk_seq.size(); ++j) new_log_probs[j] += (topk_seq[j].back() == kEos) * -kInf;
      std::vector<Ids> next_alive;
      std::vector<double> next_alive_log_probs;
      for (int64_t j : reference_top_k(new_log_probs, beam)) {
        next_alive.push_back(topk_seq[j]);
        next_alive_log_probs.push_back(new_log_probs[j]);
      }
      // _get_new_finished_state
      std::vector<Ids> seq = finished_seq[b];
      for (auto& s : seq) s.push_back(0);
      std::vector<double> scores = finished_scores[b];
      std::vector<char> flags = finished_flags[b];
      for (std::size_t j = 0; j < topk_seq.size(); ++j) {
        const bool ended = topk_seq[j].back() == kEos;
        seq.push_back(topk_seq[j]);
        scores.push_back(topk_log_probs[j] / length_norm(alpha, i + 1) + (1.0 - ended) * -kInf);
        flags.push_back(ended);
      }
      finished_seq[b].clear(), finished_scores[b].clear(), finished_flags[b].clear();
      for (int64_t j : reference_top_k(scores, beam)) {
        finished_seq[b].push_back(seq[j]);
        finished_scores[b].push_back(scores[j]);
        finished_flags[b].push_back(flags[j]);
      }
      alive_seq[b] = next_alive;
      alive_log_probs[b] = next_alive_log_probs;
    }
    ++i;
  }
  std::vector<ReferenceResult> out;
  for (int64_t b = 0; b < batch; ++b) {
    const bool any = std::any_of(finished_flags[b].begin(), finished_flags[b].end(), [](char f) { return f; });
    const Ids& seq = any ? finished_seq[b][0] : alive_seq[b][0];
    out.push_back({Ids(seq.begin() + 1, std::find(seq.begin() + 1, seq.end(), kEos)),
                   any ? finished_scores[b][0] : alive_log_probs[b][0], i});
  }
  return out;
}

// A BeamSearchDecoder over a function of whole sequences: it keeps each row's sequence itself
// from the ids it is fed and the rows it is told to keep, as a cache would, and counts its steps.
class SequenceDecoder : public BeamSearchDecoder {
 public:
  // fn(sentence, sequence): the next token's logits.
  using Fn = std::function<std::vector<float>(int64_t, const Ids&)>;
  SequenceDecoder(int64_t sentences, int64_t beam, Fn fn) : beam_(beam), fn_(std::move(fn)) {
    for (int64_t s = 0; s < sentences; ++s)
      for (int64_t b = 0; b < beam; ++b) rows_.push_back({s, Ids{}});
  }
  Tensor next_logits(const std::vector<int32_t>& last_ids) override {
    BOOST_REQUIRE_EQUAL(last_ids.size(), rows_.size());
    std::vector<std::vector<float>> logits;
    for (std::size_t r = 0; r < rows_.size(); ++r) {
      rows_[r].second.push_back(last_ids[r]);
      logits.push_back(fn_(rows_[r].first, rows_[r].second));
    }
    const int64_t v = static_cast<int64_t>(logits[0].size());
    Tensor out = Tensor::empty({static_cast<int64_t>(rows_.size()), v});
    for (std::size_t r = 0; r < rows_.size(); ++r)
      std::copy(logits[r].begin(), logits[r].end(), out.data<float>() + r * v);
    ++steps;
    return out;
  }
  void keep_rows(const std::vector<int64_t>& origins) override {
    BOOST_REQUIRE_EQUAL(origins.size() % beam_, 0u);
    std::vector<std::pair<int64_t, Ids>> kept;
    for (int64_t o : origins) kept.push_back(rows_.at(o));
    rows_.swap(kept);
  }
  int64_t steps = 0;

 private:
  int64_t beam_;
  Fn fn_;
  std::vector<std::pair<int64_t, Ids>> rows_;  // (sentence, the ids fed so far)
};

// Logits of a hashed (sentence, sequence), quantised to steps of 0.5 so that ties are common; EOS
// more likely as the sequence grows, so that hypotheses finish at different lengths.
std::vector<float> hashed_logits(int64_t sentence, const Ids& seq, int64_t vocab) {
  uint64_t h = 1469598103934665603ull ^ static_cast<uint64_t>(sentence) * 0x9e3779b97f4a7c15ull;
  for (int32_t id : seq) h = (h ^ static_cast<uint64_t>(id + 1)) * 1099511628211ull;
  Rng rng(h);
  std::vector<float> out;
  for (int64_t v = 0; v < vocab; ++v) out.push_back(static_cast<float>(std::round(rng.uniform(-3.0, 3.0) * 2) / 2));
  out[kEos] += 0.5f * static_cast<float>(seq.size());
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(transformer_decoding)

BOOST_AUTO_TEST_CASE(cached_steps_give_the_uncached_logits) {
  Context ctx(Device::cpu, 2);
  Transformer model(tiny(), 23);
  model.initialize(5);
  const Sources s = random_sources({7, 4, 1}, 23, 1);
  const int64_t steps = 6;
  Rng rng(2);
  std::vector<Ids> prefixes(3, Ids{0});
  IncrementalDecoder decoder(ctx, model, s.ids, s.lengths, 1, steps);
  double worst = 0;
  for (int64_t t = 0; t < steps; ++t) {
    std::vector<int32_t> last;
    for (const Ids& p : prefixes) last.push_back(p.back());
    const Tensor ours = decoder.step(last);
    const double err = relative_error(ours, uncached_next_logits(ctx, model, s, prefixes));
    BOOST_TEST(err < 1e-5, "step " << t << ": logits " << err << " from decode()'s, relative to the largest");
    worst = std::max(worst, err);
    for (Ids& p : prefixes) p.push_back(2 + static_cast<int32_t>(rng.below(21)));
  }
  BOOST_TEST_MESSAGE("cached against decode(): largest difference " << worst << " of the largest logit");
  BOOST_CHECK_THROW(decoder.step({0, 0}), Error);  // 2 ids for 3 rows
}

BOOST_AUTO_TEST_CASE(kept_rows_follow_their_hypotheses) {
  // 3 sentences x 3 beams, 20 steps (the caches start with room for 16 positions and grow); each
  // step every row takes its own token, then keep_rows reorders and repeats rows within sentences,
  // and at step 3 drops sentence 1, at step 17 sentence 0.
  Context ctx(Device::cpu, 2);
  Transformer model(tiny(), 19);
  model.initialize(8);
  const Sources s = random_sources({5, 7, 2}, 19, 3);
  const int64_t beams = 3, steps = 20;
  Rng rng(4);
  std::vector<int64_t> sentence{0, 0, 0, 1, 1, 1, 2, 2, 2};
  std::vector<Ids> prefixes(9, Ids{0});
  IncrementalDecoder decoder(ctx, model, s.ids, s.lengths, beams, steps);
  BOOST_CHECK_THROW(decoder.keep_rows({0, 1, 2, 3}), Error);  // not whole sentences of 3 beams
  BOOST_CHECK_THROW(decoder.keep_rows({0, 1, 3}), Error);     // one sentence's rows from two
  BOOST_CHECK_THROW(decoder.keep_rows({0, 1, 9}), Error);     // no row 9
  for (int64_t t = 0; t < steps; ++t) {
    std::vector<int32_t> last;
    for (const Ids& p : prefixes) last.push_back(p.back());
    const Tensor ours = decoder.step(last);
    const double err = relative_error(ours, uncached_next_logits(ctx, model, pick(s, sentence), prefixes));
    BOOST_TEST(err < 1e-5, "step " << t << " (" << prefixes.size() << " rows): logits " << err << " from decode()'s");
    for (Ids& p : prefixes) p.push_back(2 + static_cast<int32_t>(rng.below(17)));
    std::vector<int64_t> origins, next_sentence;
    std::vector<Ids> next_prefixes;
    for (int64_t group = 0; group < static_cast<int64_t>(prefixes.size()) / beams; ++group) {
      const int64_t sent = sentence[group * beams];
      if ((t == 3 && sent == 1) || (t == 17 && sent == 0)) continue;
      for (int64_t b = 0; b < beams; ++b) {
        const int64_t origin = group * beams + static_cast<int64_t>(rng.below(beams));  // repeats allowed
        origins.push_back(origin);
        next_prefixes.push_back(prefixes[origin]);
        next_sentence.push_back(sent);
      }
    }
    decoder.keep_rows(origins);
    BOOST_TEST(decoder.rows() == static_cast<int64_t>(origins.size()));
    prefixes.swap(next_prefixes);
    sentence.swap(next_sentence);
  }
}

BOOST_AUTO_TEST_CASE(greedy_on_the_cache_equals_the_uncached_loop) {
  // A vocabulary of 7, so that the end of sentence comes at different steps and rows leave.
  Context ctx(Device::cpu, 2);
  for (uint64_t seed : {11, 12, 13}) {
    Transformer model(tiny(), 7);
    model.initialize(seed);
    const Sources s = random_sources({6, 3, 1, 8, 5}, 7, seed);
    const std::vector<Ids> ours = model.translate_greedy(ctx, s.ids, s.lengths, 6);
    const std::vector<Ids> reference = uncached_greedy(ctx, model, s, 6);
    for (std::size_t i = 0; i < reference.size(); ++i)
      BOOST_TEST(ours[i] == reference[i], "seed " << seed << " sentence " << i);
  }
}

BOOST_AUTO_TEST_CASE(beam_search_is_the_reference_on_tied_hashed_logits) {
  // Equal maximal lengths: the reference's batch, its global stopping rule, against ours; and each
  // sentence alone, whose stopping rule is ours (the batch may run longer: a sentence's lowest
  // finished score, fillers counting 0, can fall again as more hypotheses finish, but its best
  // finished one, the result, stays).
  for (int64_t beam : {1, 2, 4}) {
    for (double alpha : {0.0, 0.6, 2.0}) {
      const int64_t sentences = 5, vocab = 9, max_length = 9;
      const auto fn = [&](int64_t sentence, const Ids& seq) { return hashed_logits(sentence, seq, vocab); };
      const auto reference = reference_beam_search(
          [&](const std::vector<Ids>& flat) {
            std::vector<std::vector<float>> out;
            for (std::size_t r = 0; r < flat.size(); ++r) out.push_back(fn(static_cast<int64_t>(r) / beam, flat[r]));
            return out;
          },
          sentences, beam, alpha, max_length);
      SequenceDecoder decoder(sentences, beam, fn);
      const auto ours = beam_search(decoder, std::vector<int64_t>(sentences, max_length), {beam, alpha, kEos});
      int64_t most_steps = 0;
      for (int64_t s = 0; s < sentences; ++s) {
        BOOST_TEST(ours[s].ids == reference[s].ids, "beam " << beam << " alpha " << alpha << " sentence " << s);
        BOOST_TEST(std::abs(ours[s].score - reference[s].score) <= 1e-12 * std::max(1.0, std::abs(reference[s].score)));
        const auto alone = reference_beam_search(
            [&](const std::vector<Ids>& flat) {
              std::vector<std::vector<float>> out;
              for (const Ids& seq : flat) out.push_back(fn(s, seq));
              return out;
            },
            1, beam, alpha, max_length);
        BOOST_TEST(alone[0].ids == reference[s].ids);
        most_steps = std::max(most_steps, alone[0].steps);
      }
      BOOST_TEST(decoder.steps == most_steps, "beam " << beam << " alpha " << alpha);
      BOOST_TEST(decoder.steps <= reference[0].steps);
    }
  }
  // A vocabulary smaller than 2k: candidates of the beams still at -inf (the first step) enter.
  for (int64_t vocab : {3, 5}) {
    const int64_t beam = 4, sentences = 3, max_length = 6;
    const auto fn = [&](int64_t sentence, const Ids& seq) { return hashed_logits(sentence, seq, vocab); };
    const auto reference = reference_beam_search(
        [&](const std::vector<Ids>& flat) {
          std::vector<std::vector<float>> out;
          for (std::size_t r = 0; r < flat.size(); ++r) out.push_back(fn(static_cast<int64_t>(r) / beam, flat[r]));
          return out;
        },
        sentences, beam, 0.6, max_length);
    SequenceDecoder decoder(sentences, beam, fn);
    const auto ours = beam_search(decoder, std::vector<int64_t>(sentences, max_length), {beam, 0.6, kEos});
    for (int64_t s = 0; s < sentences; ++s) {
      BOOST_TEST(ours[s].ids == reference[s].ids, "vocabulary " << vocab << " sentence " << s);
      BOOST_TEST(ours[s].score == reference[s].score, "vocabulary " << vocab << " sentence " << s);
    }
  }
  // Different maximal lengths: each sentence is the reference run on it alone.
  const int64_t beam = 3, vocab = 8;
  const std::vector<int64_t> lengths{2, 11, 5, 1};
  const auto fn = [&](int64_t sentence, const Ids& seq) { return hashed_logits(sentence, seq, vocab); };
  SequenceDecoder decoder(4, beam, fn);
  const auto ours = beam_search(decoder, lengths, {beam, 0.6, kEos});
  int64_t most_steps = 0;
  for (int64_t s = 0; s < 4; ++s) {
    const auto alone = reference_beam_search(
        [&](const std::vector<Ids>& flat) {
          std::vector<std::vector<float>> out;
          for (const Ids& seq : flat) out.push_back(fn(s, seq));
          return out;
        },
        1, beam, 0.6, lengths[s]);
    BOOST_TEST(ours[s].ids == alone[0].ids, "sentence " << s);
    BOOST_TEST(ours[s].score == alone[0].score, "sentence " << s);
    most_steps = std::max(most_steps, alone[0].steps);
  }
  BOOST_TEST(decoder.steps == most_steps);
}

BOOST_AUTO_TEST_CASE(beam_search_finds_what_greedy_misses_and_stops_early) {
  // Ids: 0 pad, 1 EOS, 2 a, 3 b. P(a) 0.6, P(b) 0.4 first; after a: EOS 0.3, a 0.35, b 0.35; after
  // b: EOS 0.9; after two tokens: EOS 0.5, a 0.25, b 0.25. Greedy: a, a, EOS (p 0.105). Beam 2,
  // alpha 0: step 0 keeps a, b; step 1 finishes "b EOS" (log 0.36) and "a EOS" (log 0.18), alive
  // "a a", "a b" (log 0.21); step 2's candidates are at most log(0.21 * 0.5) < log 0.18, and the
  // lowest finished log 0.18 beats the best alive log(0.21 * 0.25): the search stops after 3 steps
  // of the 10 allowed, with "b".
  const auto fn = [](int64_t, const Ids& seq) {
    std::vector<double> p{1e-12, 1e-12, 0.6, 0.4};
    if (seq.size() == 2)
      p = seq[1] == 2 ? std::vector<double>{1e-12, 0.3, 0.35, 0.35} : std::vector<double>{1e-12, 0.9, 0.05, 0.05};
    if (seq.size() > 2) p = {1e-12, 0.5, 0.25, 0.25};
    std::vector<float> logits;
    for (double x : p) logits.push_back(static_cast<float>(std::log(x)));
    return logits;
  };
  SequenceDecoder decoder(1, 2, fn);
  const auto r = beam_search(decoder, {10}, {2, 0.0, kEos});
  BOOST_TEST(r[0].ids == (Ids{3}));
  BOOST_TEST(r[0].finished);
  BOOST_TEST(std::abs(r[0].score - std::log(0.36)) < 1e-6);
  BOOST_TEST(decoder.steps == 3);
  // Beam 1 keeps 2 candidates a step: "a EOS" (third after step 1) never finishes; "a a EOS" does.
  SequenceDecoder one(1, 1, fn);
  const auto g = beam_search(one, {10}, {1, 0.0, kEos});
  BOOST_TEST(g[0].ids == (Ids{2, 2}));
  BOOST_TEST(std::abs(g[0].score - std::log(0.6 * 0.35 * 0.5)) < 1e-6);
  // The length penalty: with alpha 0.6 the score is log p / ((5 + 2) / 6)^0.6 for "b EOS".
  SequenceDecoder penalised(1, 2, fn);
  const auto p = beam_search(penalised, {10}, {2, 0.6, kEos});
  BOOST_TEST(p[0].ids == (Ids{3}));
  BOOST_TEST(std::abs(p[0].score - std::log(0.36) / std::pow(7.0 / 6.0, 0.6)) < 1e-6);
  // One token at most, and beam 1's 2 candidates (a, b) without the end of sentence: the best alive
  // hypothesis, its log probability. (With beam 2 all 4 ids are candidates: "EOS", at 1e-12, would
  // be finished and chosen.)
  SequenceDecoder short_one(1, 1, fn);
  const auto a = beam_search(short_one, {1}, {1, 0.6, kEos});
  BOOST_TEST(a[0].ids == (Ids{2}));
  BOOST_TEST(!a[0].finished);
  BOOST_TEST(std::abs(a[0].score - std::log(0.6)) < 1e-6);
}

BOOST_AUTO_TEST_CASE(beam_search_breaks_ties_as_tf_top_k) {
  // Ids 2 and 3 equally likely first, then the end of sentence: the lower index wins each tie (the
  // alive beam with beam 1; with beam 2 the order of the alive beams, then of the finished ones).
  const auto fn = [](int64_t, const Ids& seq) {
    const std::vector<double> p =
        seq.size() == 1 ? std::vector<double>{1e-12, 1e-12, 0.5, 0.5} : std::vector<double>{1e-12, 0.9, 0.05, 0.05};
    std::vector<float> logits;
    for (double x : p) logits.push_back(static_cast<float>(std::log(x)));
    return logits;
  };
  for (int64_t beam : {1, 2}) {
    SequenceDecoder decoder(1, beam, fn);
    BOOST_TEST(beam_search(decoder, {5}, {beam, 0.6, kEos})[0].ids == (Ids{2}), "beam " << beam);
  }
}

BOOST_AUTO_TEST_CASE(translate_beam_is_the_reference_over_decode) {
  // The real model: ours on the cache against the transliteration over decode() of every prefix,
  // each sentence alone (its own maximal length), beams 1, 3 and 4.
  Context ctx(Device::cpu, 2);
  Transformer model(tiny(), 11);
  model.initialize(21);
  const Sources s = random_sources({6, 2, 9, 4}, 11, 22);
  const int64_t max_extra = 5;
  for (int64_t beam : {1, 3, 4}) {
    const auto ours = model.translate_beam(ctx, s.ids, s.lengths, beam, 0.6, max_extra);
    BOOST_REQUIRE_EQUAL(ours.size(), 4u);
    for (int64_t i = 0; i < 4; ++i) {
      const Sources one = pick(s, std::vector<int64_t>(beam, i));
      const auto reference = reference_beam_search(
          [&](const std::vector<Ids>& flat) { return uncached_next_logits(ctx, model, one, flat); }, 1, beam, 0.6,
          s.lengths.data<int32_t>()[i] + max_extra);
      BOOST_TEST(ours[i].ids == reference[0].ids, "beam " << beam << " sentence " << i);
      BOOST_TEST(std::abs(ours[i].score - reference[0].score) < 1e-5 * std::max(1.0, std::abs(reference[0].score)),
                 "beam " << beam << " sentence " << i << ": score " << ours[i].score << " vs " << reference[0].score);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
