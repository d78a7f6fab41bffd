// BLEU as MLPerf's Transformer reference computes it (text/bleu.hpp): the tokeniser on the
// reference's own test sentence and on the edges of its three regex passes (the expected tokens
// are what the reference's bleu_tokenize returns under Python 3.11), the reading of a file's
// text (strip, splitlines, UTF-8 errors naming the line), corpus BLEU worked out by hand, and the
// score's printed form. tests/cli/test_bleu.sh compares whole files with a Python port.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "scaletrain/core/error.hpp"
#include "scaletrain/text/bleu.hpp"

using namespace scaletrain::text;
using Tokens = std::vector<std::string>;

namespace {
Tokens tok(const std::string& utf8) { return bleu_tokenize(utf8_decode(utf8, "test")); }
BleuText text_of(const std::string& bytes, const std::string& name = "t.txt") { return read_bleu_text(bytes, name); }
double score_of(const std::string& hyp, const std::string& ref, bool cased = false) {
  return bleu_score(text_of(hyp, "hyp"), text_of(ref, "ref"), cased).bleu;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(bleu)

BOOST_AUTO_TEST_CASE(tokenizer_matches_the_references_examples) {
  // compute_bleu_test.py's test_bleu_tokenize.
  BOOST_TEST(tok("Test0, 1 two, 3") == (Tokens{"Test0", ",", "1", "two", ",", "3"}));
  // Punctuation between digits stays (thousands and decimals); a number's final dot stays too
  // (mteval-v14's known quirk, kept on purpose by the reference).
  BOOST_TEST(tok("1,000.5 and 3.14") == (Tokens{"1,000.5", "and", "3.14"}));
  BOOST_TEST(tok("year 2014.") == (Tokens{"year", "2014."}));
  BOOST_TEST(tok("10%") == (Tokens{"10%"}));
  BOOST_TEST(tok(",1") == (Tokens{",1"}));
  BOOST_TEST(tok("e-mail 1-2") == (Tokens{"e", "-", "mail", "1-2"}));
  BOOST_TEST(tok("\"Hi!\" she said...") == (Tokens{"\"", "Hi", "!", "\"", "she", "said", ".", ".", "."}));
  BOOST_TEST(tok("«Ja»,") == (Tokens{"«", "Ja", "»", ","}));
  // Symbols always stand alone, digits or not.
  BOOST_TEST(tok("$5 for 3€") == (Tokens{"$", "5", "for", "3", "€"}));
  BOOST_TEST(tok("a+b=c") == (Tokens{"a", "+", "b", "=", "c"}));
}

BOOST_AUTO_TEST_CASE(tokenizer_scans_each_pass_once_without_overlap) {
  // Pass 1 on "a,,b" matches "a," and resumes after it: ",b" is left for pass 2.
  BOOST_TEST(tok("a,,b") == (Tokens{"a", ",", ",", "b"}));
  BOOST_TEST(tok("x,,,y") == (Tokens{"x", ",", ",", ",", "y"}));
  // "a." consumes the dot, so ".," is never tried; ",1" is followed by a digit: one token.
  BOOST_TEST(tok("a.,1") == (Tokens{"a", ".", ",1"}));
  BOOST_TEST(tok("1.,2") == (Tokens{"1", ".", ",", "2"}));
}

BOOST_AUTO_TEST_CASE(tokenizer_keeps_the_references_class_quirks) {
  // The reference's "[...]" of all P characters lets "\]" escape the bracket: no backslash in it.
  BOOST_TEST(!is_bleu_punctuation(U'\\'));
  BOOST_TEST(is_punctuation(U'\\'));
  BOOST_TEST(is_bleu_punctuation(U']'));
  BOOST_TEST(tok("a\\b") == (Tokens{"a\\b"}));
  BOOST_TEST(tok("(a)") == (Tokens{"(", "a", ")"}));
  // str.split(): every Unicode space, \x1f included.
  BOOST_TEST(tok("a\u3000b\u00a0c\x1f"
                 "d\u2009e") == (Tokens{"a", "b", "c", "d", "e"}));
  BOOST_TEST(tok("ΟΔΟΣ.") == (Tokens{"ΟΔΟΣ", "."}));
  BOOST_TEST(tok("").empty());
  BOOST_TEST(tok(" \t ").empty());
}

BOOST_AUTO_TEST_CASE(text_is_stripped_and_split_as_python_does) {
  const BleuText t = text_of(
      "\n  a\r\nb\rc\u2028d\u0085"
      "e\x0b"
      "f\x0c"
      "g\x1c"
      "h\x1d"
      "i\x1e"
      "j\u2029k\n\n");
  std::vector<std::string> lines;
  for (const CodePoints& l : t.lines) lines.push_back(utf8_encode(l));
  BOOST_TEST(lines == (std::vector<std::string>{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"}));
  BOOST_TEST(text_of("a\n\n b \r\n").lines.size() == 3u);  // the empty line counts
  BOOST_TEST(text_of(" \n\t ").lines.empty());
  BOOST_TEST(split_lines(utf8_decode("x\r\r\ny\x1fz", "t")).size() == 3u);  // \x1f is no line break
}

BOOST_AUTO_TEST_CASE(invalid_utf8_names_the_file_and_line) {
  try {
    text_of("good\nalso good\nbad \xff byte\n", "hyp.de");
    BOOST_FAIL("no error");
  } catch (const scaletrain::Error& e) {
    const std::string what = e.what();
    BOOST_TEST(what.find("hyp.de line 3") != std::string::npos, what);
  }
}

BOOST_AUTO_TEST_CASE(line_counts_must_agree) {
  try {
    score_of("a\nb\nc", "a\nb");
    BOOST_FAIL("no error");
  } catch (const scaletrain::Error& e) {
    const std::string what = e.what();
    BOOST_TEST(what.find("hyp has 3 lines but ref has 2") != std::string::npos, what);
  }
}

BOOST_AUTO_TEST_CASE(corpus_bleu_by_hand) {
  // ref "the cat sat on the mat" (6 tokens), hyp "the cat sat on mat" (5):
  //   1-grams the cat sat on mat: 5 of 5 in the reference
  //   2-grams the-cat cat-sat sat-on on-mat: 3 of 4 (no "on mat")
  //   3-grams the-cat-sat cat-sat-on sat-on-mat: 2 of 3
  //   4-grams the-cat-sat-on cat-sat-on-mat: 1 of 2
  //   geo mean (1 * 3/4 * 2/3 * 1/2)^(1/4) = 0.25^0.25 = 0.7071068
  //   brevity penalty exp(1 - 6/5) = 0.8187308; BLEU 100 * float32(0.5789301) = 57.893008
  const BleuScore s = corpus_bleu({{"the", "cat", "sat", "on", "the", "mat"}}, {{"the", "cat", "sat", "on", "mat"}});
  BOOST_TEST(s.matches == (std::array<int64_t, 4>{5, 3, 2, 1}));
  BOOST_TEST(s.possible == (std::array<int64_t, 4>{5, 4, 3, 2}));
  BOOST_TEST(s.precisions[1] == 0.75);
  BOOST_TEST(s.hyp_len == 5);
  BOOST_TEST(s.ref_len == 6);
  BOOST_TEST(s.geo_mean == std::pow(0.25, 0.25), boost::test_tools::tolerance(1e-15));
  BOOST_TEST(s.brevity_penalty == std::exp(-0.2), boost::test_tools::tolerance(1e-15));
  BOOST_TEST(s.bleu == 100.0 * static_cast<float>(std::pow(0.25, 0.25) * std::exp(-0.2)));
  BOOST_TEST(s.note.empty());
  BOOST_TEST(format_bleu(s.bleu) == "57.89300799369812");  // what the reference prints

  // Clipping: "the" three times against one in the reference matches once. The second corpus
  // line adds its n-grams to the same totals.
  const BleuScore c =
      corpus_bleu({{"the", "cat"}, {"a", "b", "c", "d"}}, {{"the", "the", "the"}, {"a", "b", "c", "d"}});
  BOOST_TEST(c.matches == (std::array<int64_t, 4>{1 + 4, 0 + 3, 0 + 2, 0 + 1}));
  BOOST_TEST(c.possible == (std::array<int64_t, 4>{3 + 4, 2 + 3, 1 + 2, 0 + 1}));
}

BOOST_AUTO_TEST_CASE(smoothing_and_missing_orders) {
  // ref "the cat", hyp "the dog": 1-grams 1 of 2; 2-grams 0 of 1, smoothed to 1 / (2 * 1);
  // no 3- or 4-grams: left out of the log sum, yet the sum is still divided by 4:
  // exp((log 0.5 + log 0.5) / 4) = 0.5^0.5 = 0.7071068, BLEU 70.71068 (no brevity penalty).
  const BleuScore s = corpus_bleu({{"the", "cat"}}, {{"the", "dog"}});
  BOOST_TEST(s.precisions == (std::array<double, 4>{0.5, 0.5, 0.0, 0.0}));
  BOOST_TEST(s.bleu == 100.0 * static_cast<float>(std::sqrt(0.5)));
  BOOST_TEST(format_bleu(s.bleu) == "70.71067690849304");
  // Each order without a match doubles the smoothing: 1-grams 1/4, 2-grams 1/(2*3), 3-grams
  // 1/(4*2), 4-grams 1/(8*1).
  const BleuScore t = corpus_bleu({{"w", "x", "y", "z"}}, {{"w", "a", "b", "c"}});
  BOOST_TEST(t.precisions == (std::array<double, 4>{0.25, 1.0 / 6, 0.125, 0.125}));
  // Nothing matches at all: every order smoothed.
  const BleuScore u = corpus_bleu({{"x"}}, {{"y"}});
  BOOST_TEST(u.precisions[0] == 0.5);
  BOOST_TEST(format_bleu(u.bleu) == "84.08964276313782");
}

BOOST_AUTO_TEST_CASE(no_tokens_gives_zero_with_a_note) {
  // The reference divides by zero here; we say BLEU 0 and why.
  const BleuScore s = corpus_bleu({}, {});
  BOOST_TEST(s.bleu == 0.0);
  BOOST_TEST(s.note.find("hypotheses hold no token") != std::string::npos);
  const BleuScore e = corpus_bleu({{"a", "b"}}, {{}});
  BOOST_TEST(e.bleu == 0.0);
  BOOST_TEST(e.ref_len == 2);
  BOOST_TEST(!e.note.empty());
  const BleuScore r = corpus_bleu({{}}, {{"a"}});
  BOOST_TEST(r.bleu == 0.0);
  BOOST_TEST(r.note.find("references hold no token") != std::string::npos);
  BOOST_TEST(score_of(" \n", "") == 0.0);
  BOOST_CHECK_THROW(corpus_bleu({{"a"}}, {}), scaletrain::Error);
}

BOOST_AUTO_TEST_CASE(files_as_the_references_tests_score_them) {
  // compute_bleu_test.py: identical texts score 100, case differences only when cased.
  BOOST_TEST(score_of("test 1 two 3\nmore tests!", "test 1 two 3\nmore tests!") == 100.0);
  BOOST_TEST(score_of("test 1 two 3\nMore tests!", "Test 1 two 3\nmore tests!") == 100.0);
  BOOST_TEST(score_of("test 1 two 3\nMore tests!", "Test 1 two 3\nmore tests!", true) < 100.0);
  BOOST_TEST(score_of("Dog\nCat", "Testing\nmore tests!") < 100.0);
  // str.lower(): U+0130 becomes i + combining dot (two code points), a final capital sigma a final
  // sigma; both sides alike, so they still match.
  BOOST_TEST(score_of("İSTANBUL ΟΔΟΣ", "i\u0307stanbul οδος") == 100.0);
  BOOST_TEST(score_of("ΟΔΟΣ", "οδοσ") < 100.0);
}

BOOST_AUTO_TEST_CASE(score_prints_as_python_prints_a_float) {
  // The reference prints np.float32(bleu) * 100, a NumPy float64: Python's repr().
  BOOST_TEST(format_bleu(100.0) == "100.0");
  BOOST_TEST(format_bleu(0.0) == "0.0");
  BOOST_TEST(format_bleu(100.0 * 0.27319399f) == "27.319398522377014");
  BOOST_TEST(format_bleu(0.1) == "0.1");
  BOOST_TEST(format_bleu(0.0001) == "0.0001");
  BOOST_TEST(format_bleu(0.00009) == "9e-05");
  BOOST_TEST(format_bleu(1.5e-5) == "1.5e-05");
  BOOST_TEST(format_bleu(1e16) == "1e+16");
}

BOOST_AUTO_TEST_SUITE_END()
