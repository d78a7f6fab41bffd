// Unicode for the translation task: UTF-8 to code points and back, and the character classes
// the MLPerf Transformer's Python reference uses (its tokenizer's alphanumeric class, BLEU's
// punctuation, symbols and digits, str.split()'s white space, str.lower()). The classes come from
// a table generated from Python's unicodedata (tools/unicode_tables.py), so that a character is
// classified here exactly as the reference classifies it, not as this machine's C locale would.
#pragma once

#include <string>
#include <string_view>

namespace scaletrain::text {

// Code points, one per element: lengths and slices count characters, as Python's str does.
using CodePoints = std::u32string;

// The Unicode version of the tables (e.g. "14.0.0"; the reference ran 8.0.0).
const char* unicode_tables_version();

// Strict UTF-8: a malformed sequence, an overlong form, a surrogate or a code point above
// U+10FFFF throws scaletrain::Error naming `where` (e.g. "FILE line 12") and the byte offset.
CodePoints utf8_decode(std::string_view bytes, const std::string& where);
std::string utf8_encode(const CodePoints& text);
std::string utf8_encode(char32_t c);

bool is_alphanumeric(char32_t c);   // general category L* or N*
bool is_punctuation(char32_t c);    // P*
bool is_symbol(char32_t c);         // S*
bool is_decimal_digit(char32_t c);  // Nd
bool is_space(char32_t c);          // Python's str.isspace()

// Python's str.lower(): full case mapping (U+0130 becomes two code points) with the final-sigma
// rule (capital sigma at the end of a word lowers to U+03C2).
CodePoints to_lower(const CodePoints& text);

// Python's str.strip() with no argument: white space (is_space) removed from both ends.
CodePoints strip(const CodePoints& text);

}  // namespace scaletrain::text
