// BLEU as MLPerf's Transformer reference computes it (include/scaletrain/text/bleu.hpp).
#include "scaletrain/text/bleu.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <unordered_map>

#include "scaletrain/core/error.hpp"

namespace scaletrain::text {
namespace {

bool is_line_break(char32_t c) {
  switch (c) {
    case U'\n':
    case U'\r':
    case 0x0b:
    case 0x0c:
    case 0x1c:
    case 0x1d:
    case 0x1e:
    case 0x85:
    case 0x2028:
    case 0x2029:
      return true;
    default:
      return false;
  }
}

// One n-gram of token ids, unused positions -1.
using Ngram = std::array<int32_t, kBleuMaxOrder>;

void ngrams_of_order(const std::vector<int32_t>& ids, int n, std::vector<Ngram>& out) {
  out.clear();
  for (std::size_t i = 0; i + n <= ids.size(); ++i) {
    Ngram g;
    g.fill(-1);
    std::copy(ids.begin() + i, ids.begin() + i + n, g.begin());
    out.push_back(g);
  }
  std::sort(out.begin(), out.end());
}

// Sum over the reference's n-grams of min(count in reference, count in hypothesis), both sorted:
// the reference's clipped `overlap`.
int64_t clipped_matches(const std::vector<Ngram>& ref, const std::vector<Ngram>& hyp) {
  int64_t matches = 0;
  std::size_t i = 0, j = 0;
  while (i < ref.size() && j < hyp.size()) {
    if (ref[i] < hyp[j]) {
      ++i;
    } else if (hyp[j] < ref[i]) {
      ++j;
    } else {
      const Ngram g = ref[i];
      int64_t in_ref = 0, in_hyp = 0;
      while (i < ref.size() && ref[i] == g) ++i, ++in_ref;
      while (j < hyp.size() && hyp[j] == g) ++j, ++in_hyp;
      matches += std::min(in_ref, in_hyp);
    }
  }
  return matches;
}

}  // namespace

bool is_bleu_punctuation(char32_t c) { return c != U'\\' && is_punctuation(c); }

std::vector<std::string> bleu_tokenize(const CodePoints& line) {
  // Pass 1: ([^\d])([\p{P}]) -> "\1 \2 ". A match consumes both characters, so the punctuation
  // it ends with cannot start the next match ("a,,b" -> "a , ,b").
  CodePoints a;
  a.reserve(line.size() * 2);
  for (std::size_t i = 0; i < line.size();) {
    if (i + 1 < line.size() && !is_decimal_digit(line[i]) && is_bleu_punctuation(line[i + 1])) {
      a += line[i];
      a += U' ';
      a += line[i + 1];
      a += U' ';
      i += 2;
    } else {
      a += line[i++];
    }
  }
  // Pass 2: ([\p{P}])([^\d]) -> " \1 \2".
  CodePoints b;
  b.reserve(a.size() * 2);
  for (std::size_t i = 0; i < a.size();) {
    if (i + 1 < a.size() && is_bleu_punctuation(a[i]) && !is_decimal_digit(a[i + 1])) {
      b += U' ';
      b += a[i];
      b += U' ';
      b += a[i + 1];
      i += 2;
    } else {
      b += a[i++];
    }
  }
  // Pass 3: ([\p{S}]) -> " \1 ", then str.split().
  CodePoints c;
  c.reserve(b.size() * 2);
  for (char32_t ch : b) {
    if (is_symbol(ch)) {
      c += U' ';
      c += ch;
      c += U' ';
    } else {
      c += ch;
    }
  }
  std::vector<std::string> tokens;
  std::size_t i = 0;
  while (i < c.size()) {
    while (i < c.size() && is_space(c[i])) ++i;
    const std::size_t start = i;
    while (i < c.size() && !is_space(c[i])) ++i;
    if (i > start) tokens.push_back(utf8_encode(c.substr(start, i - start)));
  }
  return tokens;
}

std::vector<CodePoints> split_lines(const CodePoints& text) {
  std::vector<CodePoints> lines;
  std::size_t start = 0, i = 0;
  while (i < text.size()) {
    if (!is_line_break(text[i])) {
      ++i;
      continue;
    }
    lines.push_back(text.substr(start, i - start));
    i += (text[i] == U'\r' && i + 1 < text.size() && text[i + 1] == U'\n') ? 2 : 1;
    start = i;
  }
  if (start < text.size()) lines.push_back(text.substr(start));
  return lines;
}

BleuText read_bleu_text(std::string_view bytes, const std::string& name) {
  // Decoded a \n-line at a time so that an error names the line an editor shows (a \n byte is
  // never part of a multi-byte UTF-8 sequence); the lines the reference scores come after.
  CodePoints text;
  text.reserve(bytes.size());
  std::size_t line = 1, start = 0;
  while (start <= bytes.size()) {
    std::size_t end = bytes.find('\n', start);
    if (end == std::string_view::npos) end = bytes.size();
    text += utf8_decode(bytes.substr(start, end - start), name + " line " + std::to_string(line));
    if (end == bytes.size()) break;
    text += U'\n';
    start = end + 1;
    ++line;
  }
  return BleuText{name, split_lines(strip(text))};
}

BleuScore corpus_bleu(const TokenizedCorpus& references, const TokenizedCorpus& hypotheses) {
  ST_CHECK(references.size() == hypotheses.size(),
           "corpus BLEU: " << hypotheses.size() << " hypotheses but " << references.size() << " references");
  BleuScore s;
  std::unordered_map<std::string, int32_t> vocabulary;
  const auto to_ids = [&](const std::vector<std::string>& tokens) {
    std::vector<int32_t> ids;
    ids.reserve(tokens.size());
    for (const std::string& t : tokens)
      ids.push_back(vocabulary.emplace(t, static_cast<int32_t>(vocabulary.size())).first->second);
    return ids;
  };
  std::vector<Ngram> ref_ngrams, hyp_ngrams;
  for (std::size_t k = 0; k < references.size(); ++k) {
    const std::vector<int32_t> ref = to_ids(references[k]), hyp = to_ids(hypotheses[k]);
    s.ref_len += static_cast<int64_t>(ref.size());
    s.hyp_len += static_cast<int64_t>(hyp.size());
    for (int n = 1; n <= kBleuMaxOrder; ++n) {
      ngrams_of_order(ref, n, ref_ngrams);
      ngrams_of_order(hyp, n, hyp_ngrams);
      s.matches[n - 1] += clipped_matches(ref_ngrams, hyp_ngrams);
      s.possible[n - 1] += static_cast<int64_t>(hyp_ngrams.size());
    }
  }
  // The reference's arithmetic, in its order, so that the float64 values are the same.
  double smooth = 1.0;
  for (int i = 0; i < kBleuMaxOrder; ++i) {
    const auto possible = static_cast<double>(s.possible[i]);
    if (s.possible[i] == 0) {
      s.precisions[i] = 0.0;
    } else if (s.matches[i] > 0) {
      s.precisions[i] = static_cast<double>(s.matches[i]) / possible;
    } else {
      smooth *= 2;
      s.precisions[i] = 1.0 / (smooth * possible);
    }
  }
  if (*std::max_element(s.precisions.begin(), s.precisions.end()) > 0) {
    double log_sum = 0.0;
    for (double p : s.precisions)
      if (p != 0.0) log_sum += std::log(p);
    s.geo_mean = std::exp(log_sum / kBleuMaxOrder);
  }
  if (s.hyp_len == 0 || s.ref_len == 0) {
    // The reference divides by zero here (ratio = hyp_len / ref_len, then 1 / ratio).
    s.brevity_penalty = s.hyp_len == 0 ? 0.0 : 1.0;
    s.note = s.hyp_len == 0 ? "the hypotheses hold no token: BLEU is 0 (the reference fails here, dividing by zero)"
                            : "the references hold no token: BLEU is 0 (the reference fails here, dividing by zero)";
    s.bleu = 0.0;
    return s;
  }
  const double ratio = static_cast<double>(s.hyp_len) / static_cast<double>(s.ref_len);
  s.brevity_penalty = ratio < 1.0 ? std::exp(1.0 - 1.0 / ratio) : 1.0;
  // np.float32(geo_mean * bp) * 100 under NumPy 1.x: rounded to float32, then a float64 product
  // (exact: 24 bits times 7).
  const float bleu = static_cast<float>(s.geo_mean * s.brevity_penalty);
  s.bleu = static_cast<double>(bleu) * 100.0;
  return s;
}

BleuScore bleu_score(const BleuText& hypotheses, const BleuText& references, bool cased) {
  ST_CHECK(hypotheses.lines.size() == references.lines.size(),
           "BLEU: " << hypotheses.name << " has " << hypotheses.lines.size() << " line"
                    << (hypotheses.lines.size() == 1 ? "" : "s") << " but " << references.name << " has "
                    << references.lines.size()
                    << " (counted as the reference counts them: the text stripped of white space at both ends, "
                       "then split at line breaks, \\r\\n, \\r, \\v, \\f, U+2028 and the like included)");
  const auto tokenize = [cased](const BleuText& text) {
    TokenizedCorpus out;
    out.reserve(text.lines.size());
    for (const CodePoints& line : text.lines) out.push_back(bleu_tokenize(cased ? line : to_lower(line)));
    return out;
  };
  return corpus_bleu(tokenize(references), tokenize(hypotheses));
}

std::string format_bleu(double score) {
  char buf[64];
  const double magnitude = std::fabs(score);
  const bool positional = magnitude == 0.0 || (magnitude >= 1e-4 && magnitude < 1e16);
  const auto r = std::to_chars(buf, buf + sizeof buf, score,
                               positional ? std::chars_format::fixed : std::chars_format::scientific);
  std::string out(buf, r.ptr);
  if (positional && out.find('.') == std::string::npos) out += ".0";
  return out;
}

}  // namespace scaletrain::text
