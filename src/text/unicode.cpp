// UTF-8 and the character classes of the reference's Python (include/scaletrain/text/unicode.hpp).
#include "scaletrain/text/unicode.hpp"

#include <algorithm>
#include <cstdint>
#include <iterator>

#include "scaletrain/core/error.hpp"

namespace scaletrain::text {
namespace {

struct CodePointRange {
  char32_t first, last;
};
struct LowerCase {
  char32_t from, to, second;
};

#include "text/unicode_tables.inc"

template <std::size_t N>
bool in_ranges(const CodePointRange (&table)[N], char32_t c) {
  const CodePointRange* end = table + N;
  const CodePointRange* r =
      std::upper_bound(table, end, c, [](char32_t v, const CodePointRange& range) { return v < range.first; });
  return r != table && c <= std::prev(r)->last;
}

constexpr char32_t kCapitalSigma = 0x3a3, kSmallSigma = 0x3c3, kFinalSigma = 0x3c2;

bool is_cased(char32_t c) { return in_ranges(kCased, c); }
bool is_case_ignorable(char32_t c) { return in_ranges(kCaseIgnorable, c); }

// Python's rule (Unicode's Final_Sigma condition): skipping case-ignorable characters, a cased
// character before position i and none after it.
bool is_final_sigma(const CodePoints& text, std::size_t i) {
  std::size_t j = i;
  while (j > 0 && is_case_ignorable(text[j - 1])) --j;
  if (j == 0 || !is_cased(text[j - 1])) return false;
  std::size_t k = i + 1;
  while (k < text.size() && is_case_ignorable(text[k])) ++k;
  return k == text.size() || !is_cased(text[k]);
}

}  // namespace

const char* unicode_tables_version() { return kUnicodeTablesVersion; }

CodePoints utf8_decode(std::string_view bytes, const std::string& where) {
  CodePoints out;
  out.reserve(bytes.size());
  std::size_t i = 0;
  const auto fail = [&](const char* what) {
    ST_THROW(where << ": " << what << " at byte " << i << " (the text must be UTF-8)");
  };
  while (i < bytes.size()) {
    const auto b0 = static_cast<unsigned char>(bytes[i]);
    if (b0 < 0x80) {
      out.push_back(b0);
      ++i;
      continue;
    }
    int extra = 0;
    char32_t c = 0, min = 0;
    if ((b0 & 0xe0) == 0xc0) {
      extra = 1, c = b0 & 0x1f, min = 0x80;
    } else if ((b0 & 0xf0) == 0xe0) {
      extra = 2, c = b0 & 0x0f, min = 0x800;
    } else if ((b0 & 0xf8) == 0xf0) {
      extra = 3, c = b0 & 0x07, min = 0x10000;
    } else {
      fail("invalid UTF-8 lead byte");
    }
    if (i + extra >= bytes.size()) fail("truncated UTF-8 sequence");
    for (int k = 1; k <= extra; ++k) {
      const auto b = static_cast<unsigned char>(bytes[i + k]);
      if ((b & 0xc0) != 0x80) fail("invalid UTF-8 continuation byte");
      c = (c << 6) | (b & 0x3f);
    }
    if (c < min) fail("overlong UTF-8 sequence");
    if (c >= 0xd800 && c <= 0xdfff) fail("UTF-8 encoded surrogate");
    if (c > 0x10ffff) fail("code point above U+10FFFF");
    out.push_back(c);
    i += extra + 1;
  }
  return out;
}

std::string utf8_encode(char32_t c) {
  std::string out;
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xc0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xe0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  }
  return out;
}

std::string utf8_encode(const CodePoints& text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : text) out += utf8_encode(c);
  return out;
}

bool is_alphanumeric(char32_t c) { return in_ranges(kAlphanumeric, c); }
bool is_punctuation(char32_t c) { return in_ranges(kPunctuation, c); }
bool is_symbol(char32_t c) { return in_ranges(kSymbol, c); }
bool is_decimal_digit(char32_t c) { return in_ranges(kDecimalDigit, c); }
bool is_space(char32_t c) { return in_ranges(kWhitespace, c); }

CodePoints to_lower(const CodePoints& text) {
  CodePoints out;
  out.reserve(text.size());
  const LowerCase* end = kLowerCase + std::size(kLowerCase);
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char32_t c = text[i];
    if (c == kCapitalSigma) {
      out.push_back(is_final_sigma(text, i) ? kFinalSigma : kSmallSigma);
      continue;
    }
    const LowerCase* m =
        std::lower_bound(kLowerCase, end, c, [](const LowerCase& l, char32_t v) { return l.from < v; });
    if (m == end || m->from != c) {
      out.push_back(c);
      continue;
    }
    out.push_back(m->to);
    if (m->second != 0) out.push_back(m->second);
  }
  return out;
}

CodePoints strip(const CodePoints& text) {
  std::size_t a = 0, b = text.size();
  while (a < b && is_space(text[a])) ++a;
  while (b > a && is_space(text[b - 1])) --b;
  return text.substr(a, b - a);
}

}  // namespace scaletrain::text
