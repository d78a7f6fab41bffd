// BLEU as MLPerf's Transformer reference computes it (retired_benchmarks/transformer/tensorflow/
// transformer/compute_bleu.py with utils/metrics.py's compute_bleu, from tensor2tensor's
// bleu_hook.py): the text read whole, stripped and split into lines as Python's str.strip() and
// str.splitlines() do, lowered with str.lower() unless cased, tokenised by bleu_tokenize (a
// reduced mteval-v14 --international) and scored as corpus BLEU up to 4-grams against one
// reference a sentence. tests/python/compute_bleu_port.py is a plain-Python port of the reference
// that tests/cli/test_bleu.sh compares `scaletrain-data bleu` with.
//
// Where the reference has no answer (it divides by zero when the hypotheses or the references
// hold no token), corpus_bleu gives BLEU 0 and says why in BleuScore::note.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "scaletrain/text/unicode.hpp"

namespace scaletrain::text {

constexpr int kBleuMaxOrder = 4;

// The reference's bleu_tokenize on one line (no line break in it), in its three re.sub passes,
// each one non-overlapping left-to-right scan:
//   ([^\d])([\p{P}]) -> "\1 \2 ",  ([\p{P}])([^\d]) -> " \1 \2",  ([\p{S}]) -> " \1 ",
// then str.split(). \p{P} is the reference's class, which lacks U+005C (backslash): it builds
// "[" + every P character + "]" unescaped, so the backslash escapes the "]" after it.
// Tokens are UTF-8.
std::vector<std::string> bleu_tokenize(const CodePoints& line);

// The reference's punctuation class (general category P* except U+005C, see above).
bool is_bleu_punctuation(char32_t c);

// Python's str.splitlines(): breaks at \n, \r, \r\n, \v, \f, \x1c, \x1d, \x1e, \x85, U+2028 and
// U+2029; a break at the very end adds no empty line.
std::vector<CodePoints> split_lines(const CodePoints& text);

// A file's text as the reference reads it: strict UTF-8 (an error names `name` and the line,
// counted at \n), str.strip(), str.splitlines().
struct BleuText {
  std::string name;
  std::vector<CodePoints> lines;
};
BleuText read_bleu_text(std::string_view bytes, const std::string& name);

// Corpus BLEU and its parts. `bleu` is on 0..100 as the reference's value: compute_bleu returns
// np.float32(geo_mean * bp) and bleu_wrapper multiplies it by the Python int 100, which NumPy 1.x
// (the reference's) promotes to float64: 100 times the float32, not rounded again (NumPy >= 2
// would round the product to float32, a change below 4e-6). The rest are the reference's
// float64 intermediates.
struct BleuScore {
  double bleu = 0.0;
  double geo_mean = 0.0;                           // exp(sum of log precisions / 4), zero precisions left out
  double brevity_penalty = 1.0;                    // exp(1 - ref_len / hyp_len) when hyp_len < ref_len
  std::array<double, kBleuMaxOrder> precisions{};  // smoothed where an order has no match
  std::array<int64_t, kBleuMaxOrder> matches{};    // clipped n-gram matches per order
  std::array<int64_t, kBleuMaxOrder> possible{};   // hypothesis n-grams per order
  int64_t hyp_len = 0, ref_len = 0;                // tokens
  std::string note;                                // empty, or why BLEU is 0 where the reference fails (no tokens)
};

using TokenizedCorpus = std::vector<std::vector<std::string>>;

// metrics.compute_bleu(references, hypotheses) with max_order 4 and the brevity penalty:
// the corpora have one sentence each per line (equal counts, else scaletrain::Error).
BleuScore corpus_bleu(const TokenizedCorpus& references, const TokenizedCorpus& hypotheses);

// bleu_wrapper: both texts lowered (unless `cased`) and tokenised, then corpus_bleu. Different
// line counts throw scaletrain::Error naming both files.
BleuScore bleu_score(const BleuText& hypotheses, const BleuText& references, bool cased);

// The score as the reference prints it (str() of a NumPy float64, which is Python's repr()): the
// shortest digits that read back as the same double, positional ("27.319400787353516", "100.0",
// "0.0") for 1e-4 <= |x| < 1e16, else scientific ("1.5e-05").
std::string format_bleu(double score);

}  // namespace scaletrain::text
