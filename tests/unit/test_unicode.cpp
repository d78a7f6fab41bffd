// Unicode for the translation task (text/unicode.hpp): strict UTF-8 both ways, the character
// classes of the reference's Python (unicodedata categories, str.isspace()), and str.lower()'s
// full case mapping with the final-sigma rule.
#include <boost/test/unit_test.hpp>
#include <string>

#include "scaletrain/core/error.hpp"
#include "scaletrain/text/unicode.hpp"

using namespace scaletrain::text;

namespace {
// The error utf8_decode throws for `bytes`, or "" when it decodes.
std::string decode_error(const std::string& bytes) {
  try {
    utf8_decode(bytes, "f.txt line 7");
  } catch (const scaletrain::Error& e) {
    return e.what();
  }
  return "";
}
bool mentions(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }
std::string lower(const std::string& utf8) { return utf8_encode(to_lower(utf8_decode(utf8, "test"))); }
}  // namespace

BOOST_AUTO_TEST_SUITE(unicode)

BOOST_AUTO_TEST_CASE(utf8_round_trips) {
  // One code point of each length, the ends of each range, and the last code point.
  const CodePoints cps = {U'a',   0x7f,   0x80,   U'ä',   0x7ff,   0x800,   U'€',
                          0xd7ff, 0xe000, 0xfffd, 0xffff, 0x10000, 0x1f600, 0x10ffff};
  const std::string bytes = utf8_encode(cps);
  BOOST_TEST(bytes.size() == 1u + 1 + 2 + 2 + 2 + 3 + 3 + 3 + 3 + 3 + 3 + 4 + 4 + 4);
  BOOST_TEST((utf8_decode(bytes, "t") == cps));
  BOOST_TEST(utf8_encode(U'€') == "\xe2\x82\xac");
  BOOST_TEST(utf8_encode(char32_t{0x1f600}) == "\xf0\x9f\x98\x80");
  BOOST_TEST(utf8_decode("Grüße", "t").size() == 5u);  // characters, as Python's len()
  BOOST_TEST(utf8_decode("", "t").empty());
  BOOST_TEST(decode_error("plain ASCII\n") == "");
}

BOOST_AUTO_TEST_CASE(utf8_errors_name_the_place) {
  const std::string overlong = decode_error("ab\xc0\xaf");  // "/" in two bytes
  BOOST_TEST(mentions(overlong, "f.txt line 7"), overlong);
  BOOST_TEST(mentions(overlong, "overlong"), overlong);
  BOOST_TEST(mentions(overlong, "at byte 2"), overlong);
  BOOST_TEST(mentions(decode_error("\xe0\x80\x80"), "overlong"));      // U+0000 in three bytes
  BOOST_TEST(mentions(decode_error("\xf0\x8f\xbf\xbf"), "overlong"));  // U+FFFF in four bytes
  BOOST_TEST(mentions(decode_error("\xed\xa0\x80"), "surrogate"));     // U+D800
  BOOST_TEST(mentions(decode_error("\xed\xbf\xbf"), "surrogate"));     // U+DFFF
  BOOST_TEST(mentions(decode_error("x\xe2\x82"), "truncated"));
  BOOST_TEST(mentions(decode_error("\xf0\x9f\x98"), "truncated"));
  BOOST_TEST(mentions(decode_error("\xf4\x90\x80\x80"), "above U+10FFFF"));  // U+110000
  BOOST_TEST(mentions(decode_error("\xe2\x28\xa1"), "continuation"));
  BOOST_TEST(mentions(decode_error("\x80"), "lead byte"));
  BOOST_TEST(mentions(decode_error("\xff"), "lead byte"));
  BOOST_TEST(mentions(decode_error("caf\xe9"), "f.txt line 7"));  // Latin-1, not UTF-8
}

BOOST_AUTO_TEST_CASE(classes_follow_pythons_unicodedata) {
  BOOST_TEST(is_alphanumeric(U'ä'));
  BOOST_TEST(is_alphanumeric(U'7'));
  BOOST_TEST(is_alphanumeric(0x0663));  // ARABIC-INDIC DIGIT THREE
  BOOST_TEST(!is_alphanumeric(U'-'));
  BOOST_TEST(is_punctuation(U'«'));
  BOOST_TEST(is_punctuation(U','));
  BOOST_TEST(is_punctuation(U'\\'));   // Po (compute_bleu's own class lacks it: text/bleu.hpp)
  BOOST_TEST(is_punctuation(0x2014));  // EM DASH
  BOOST_TEST(!is_punctuation(U'€'));
  BOOST_TEST(is_symbol(U'€'));
  BOOST_TEST(is_symbol(U'$'));
  BOOST_TEST(is_symbol(U'+'));
  BOOST_TEST(is_symbol(U'^'));
  BOOST_TEST(!is_symbol(U'a'));
  BOOST_TEST(is_decimal_digit(0x0663));
  BOOST_TEST(is_decimal_digit(U'0'));
  BOOST_TEST(!is_decimal_digit(U'²'));  // No, not Nd: Python's \d does not match it either
  BOOST_TEST(!is_decimal_digit(U'Ⅳ'));  // Nl
  BOOST_TEST(is_space(0x3000));         // IDEOGRAPHIC SPACE
  BOOST_TEST(is_space(0xa0));
  BOOST_TEST(is_space(0x1f));  // str.isspace() counts the information separators
  BOOST_TEST(is_space(0x85));
  BOOST_TEST(is_space(0x2028));
  BOOST_TEST(!is_space(0x200b));  // ZERO WIDTH SPACE is Cf
  BOOST_TEST(!is_space(0xfeff));
  BOOST_TEST(std::string(unicode_tables_version()).size() >= 5u);
}

BOOST_AUTO_TEST_CASE(lower_is_pythons_str_lower) {
  BOOST_TEST(lower("Grüße AUS Köln") == "grüße aus köln");
  // U+0130 lowers to i + U+0307 COMBINING DOT ABOVE: two code points.
  const CodePoints dotted = to_lower(utf8_decode("İ", "t"));
  BOOST_TEST(dotted.size() == 2u);
  BOOST_TEST(utf8_encode(dotted) == "i\u0307");
  BOOST_TEST(lower("İstanbul") == "i\u0307stanbul");
  // Final sigma: a capital sigma ending a word lowers to U+03C2, elsewhere to U+03C3.
  BOOST_TEST(lower("ΟΔΟΣ") == "οδος");
  BOOST_TEST(lower("ΣΑ") == "σα");
  BOOST_TEST(lower("ΟΔΟΣ ΣΑ.") == "οδος σα.");
  BOOST_TEST(lower("Σ") == "σ");        // no cased letter before it
  BOOST_TEST(lower("ΑΣ'Α") == "ασ'α");  // the apostrophe is case-ignorable: a cased letter follows
  BOOST_TEST(lower("ẞ") == "ß");
  BOOST_TEST(lower("ǅ") == "ǆ");
  BOOST_TEST(utf8_encode(strip(utf8_decode("\u3000 a b\t\x1f", "t"))) == "a b");
}

BOOST_AUTO_TEST_SUITE_END()
