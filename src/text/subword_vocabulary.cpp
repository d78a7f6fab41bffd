// The reference's vocabulary build (utils/tokenizer.py: _count_tokens, _generate_subtokens and
// the min_count search), for scaletrain-data translation.
#include <algorithm>

#include "scaletrain/core/error.hpp"
#include "scaletrain/text/subword_tokenizer.hpp"

namespace scaletrain::text {
namespace {

const CodePoints kReserved[] = {U"<pad>", U"<EOS>"};
const CodePoints kEscapeChars = U"\\_u;0123456789";

using Alphabet = std::unordered_set<char32_t>;
using SubtokenCounts = std::unordered_map<CodePoints, int64_t>;

bool is_reserved(const CodePoints& s) { return s == kReserved[0] || s == kReserved[1]; }

Alphabet alphabet_of(const RunCounts& counts) {
  Alphabet a(kEscapeChars.begin(), kEscapeChars.end());
  for (const CodePoints& r : kReserved) a.insert(r.begin(), r.end());
  for (const auto& [run, n] : counts) a.insert(run.begin(), run.end());
  return a;
}

// For each run, escaped: its greedy segmentation with the current subtokens, and for every
// segment's start every substring from there to the run's end, counted as often as the run.
SubtokenCounts count_substrings(const RunCounts& runs, const Alphabet& alphabet,
                                const std::unordered_map<CodePoints, int32_t>& ids, std::size_t max_len) {
  SubtokenCounts counts;
  for (const auto& [run, n] : runs) {
    const CodePoints escaped = escape_run(run, alphabet);
    std::size_t start = 0;
    while (start < escaped.size()) {
      std::size_t piece = std::min(escaped.size() - start, max_len);
      while (piece > 0 && !ids.count(escaped.substr(start, piece))) --piece;
      ST_CHECK(piece > 0, "vocabulary build: no subtoken matches '" << utf8_encode(escaped.substr(start)) << "'");
      for (std::size_t end = start + 1; end <= escaped.size(); ++end) counts[escaped.substr(start, end - start)] += n;
      start += piece;
    }
  }
  return counts;
}

// The next subtoken list: substrings seen at least min_count times, longest first, each taking
// its count away from its proper prefixes (so a prefix survives only on its own merits); then
// the alphabet; ordered by (count, subtoken) descending. Returns the new maximum length too.
std::vector<CodePoints> next_subtokens(SubtokenCounts counts, const Alphabet& alphabet, int64_t min_count,
                                       std::size_t& max_len) {
  std::vector<std::vector<CodePoints>> by_length;
  for (const auto& [s, n] : counts)
    if (n >= min_count) {
      if (by_length.size() <= s.size()) by_length.resize(s.size() + 1);
      by_length[s.size()].push_back(s);
    }
  // The reference's next round would fail with nothing kept; one character at a time is what
  // the alphabet alone can do.
  max_len = by_length.empty() ? 1 : by_length.size() - 1;
  std::vector<std::pair<int64_t, CodePoints>> candidates;
  for (std::size_t len = by_length.size(); len-- > 1;)
    for (const CodePoints& s : by_length[len]) {
      // Order within a length does not matter: decrements reach only shorter strings.
      const int64_t n = counts[s];
      if (n < min_count) continue;
      if (!(s.size() == 1 && alphabet.count(s[0])) && !is_reserved(s)) candidates.emplace_back(n, s);
      for (std::size_t end = 1; end < len; ++end) counts[s.substr(0, end)] -= n;
    }
  for (char32_t c : alphabet) {
    const auto it = counts.find(CodePoints(1, c));
    candidates.emplace_back(it == counts.end() ? 0 : it->second, CodePoints(1, c));
  }
  std::sort(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) { return a > b; });
  std::vector<CodePoints> list(std::begin(kReserved), std::end(kReserved));
  for (auto& c : candidates) list.push_back(std::move(c.second));
  return list;
}

std::vector<CodePoints> subtokens_with_min_count(const RunCounts& runs, const Alphabet& alphabet, int64_t min_count,
                                                 int rounds) {
  std::vector<CodePoints> list(std::begin(kReserved), std::end(kReserved));
  list.insert(list.end(), alphabet.size(), CodePoints());
  std::transform(alphabet.begin(), alphabet.end(), list.begin() + 2, [](char32_t c) { return CodePoints(1, c); });
  std::size_t max_len = 1;
  for (int round = 0; round < rounds; ++round) {
    std::unordered_map<CodePoints, int32_t> ids;
    for (std::size_t i = 0; i < list.size(); ++i) ids.emplace(list[i], static_cast<int32_t>(i));
    list = next_subtokens(count_substrings(runs, alphabet, ids, max_len), alphabet, min_count, max_len);
  }
  return list;
}

int64_t distance(const std::vector<CodePoints>& list, int64_t target) {
  return std::abs(static_cast<int64_t>(list.size()) - target);
}

// The reference's binary search of min_count in [lo, hi] for a vocabulary near the target size.
BuiltVocabulary search_min_count(const RunCounts& runs, const Alphabet& alphabet, const VocabularyOptions& o,
                                 int64_t lo, int64_t hi) {
  const int64_t mid = (lo + hi) / 2;
  BuiltVocabulary here{subtokens_with_min_count(runs, alphabet, mid, o.rounds), mid};
  const int64_t size = static_cast<int64_t>(here.subtokens.size());
  if (distance(here.subtokens, o.target_size) < o.threshold || lo >= hi || mid < 2) return here;
  BuiltVocabulary other = size > o.target_size ? search_min_count(runs, alphabet, o, mid + 1, hi)
                                               : search_min_count(runs, alphabet, o, lo, mid - 1);
  return distance(other.subtokens, o.target_size) < distance(here.subtokens, o.target_size) ? other : here;
}

}  // namespace

void count_runs_in_lines(const std::vector<std::string>& lines, double file_bytes, double sample_chars,
                         RunCounts& counts, const std::string& where) {
  const bool sample = sample_chars > 0;
  // Lines skipped between two read: spreads the sample over the file (the reference's rule).
  const int64_t skip = sample ? static_cast<int64_t>(file_bytes / (sample_chars * 2)) : 0;
  double budget = sample_chars;
  int64_t skipped = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (skipped < skip) {
      ++skipped;
      continue;
    }
    if (sample && budget < 0) break;
    const CodePoints text = strip(utf8_decode(lines[i], where + " line " + std::to_string(i + 1)));
    budget -= static_cast<double>(text.size());
    skipped = 0;
    for (CodePoints& run : split_into_runs(text)) ++counts[std::move(run)];
  }
}

BuiltVocabulary build_vocabulary(const RunCounts& counts, const VocabularyOptions& options) {
  ST_CHECK(!counts.empty(), "vocabulary build: the text has no tokens");
  ST_CHECK(options.min_count >= 1, "vocabulary build: min_count " << options.min_count << " is below 1");
  const Alphabet alphabet = alphabet_of(counts);
  if (options.target_size > 0) return search_min_count(counts, alphabet, options, 1, 1000);
  return {subtokens_with_min_count(counts, alphabet, options.min_count, options.rounds), options.min_count};
}

}  // namespace scaletrain::text
