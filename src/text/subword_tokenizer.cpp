// Encoding, decoding and the vocabulary file of the reference's subword tokenizer
// (include/scaletrain/text/subword_tokenizer.hpp); the vocabulary build is in subword_vocabulary.cpp.
#include "scaletrain/text/subword_tokenizer.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "scaletrain/core/error.hpp"

namespace scaletrain::text {
namespace {

const CodePoints kPad = U"<pad>";
const CodePoints kEos = U"<EOS>";
// Always in the alphabet: what escaping writes.
const CodePoints kEscapeChars = U"\\_u;0123456789";
// What an invalid "\N;" escape decodes to (the reference's _UNDEFINED_UNICODE).
constexpr char32_t kUndefined = 0x3013;

bool is_reserved(const CodePoints& s) { return s == kPad || s == kEos; }

// Greedy longest match of `escaped` against the vocabulary.
template <typename Emit>
void greedy_split(const CodePoints& escaped, const std::unordered_map<CodePoints, int32_t>& ids, std::size_t max_len,
                  Emit emit) {
  std::size_t start = 0;
  while (start < escaped.size()) {
    std::size_t end = std::min(escaped.size(), start + max_len);
    for (; end > start; --end) {
      const auto it = ids.find(escaped.substr(start, end - start));
      if (it != ids.end()) {
        emit(it->second, end - start);
        break;
      }
    }
    // Every escaped character is in the alphabet and every alphabet character is a subtoken.
    ST_CHECK(end > start, "subword tokenizer: no subtoken matches '" << utf8_encode(escaped.substr(start))
                                                                     << "' (the vocabulary lacks its alphabet)");
    start = end;
  }
}

}  // namespace

std::vector<CodePoints> split_into_runs(const CodePoints& text) {
  std::vector<CodePoints> runs;
  if (text.empty()) return runs;
  std::vector<std::pair<std::size_t, std::size_t>> spans;  // [start, end)
  std::size_t start = 0;
  for (std::size_t i = 1; i < text.size(); ++i)
    if (is_alphanumeric(text[i]) != is_alphanumeric(text[i - 1])) {
      spans.emplace_back(start, i);
      start = i;
    }
  spans.emplace_back(start, text.size());
  for (std::size_t k = 0; k < spans.size(); ++k) {
    const auto [a, b] = spans[k];
    const bool single_space = b - a == 1 && text[a] == U' ';
    if (!single_space || a == 0 || k + 1 == spans.size()) runs.push_back(text.substr(a, b - a));
  }
  return runs;
}

CodePoints escape_run(const CodePoints& run, const std::unordered_set<char32_t>& alphabet) {
  CodePoints out;
  out.reserve(run.size() + 1);
  const auto put = [&](char32_t c) {
    if (alphabet.count(c) && c != U'\n') {
      out.push_back(c);
    } else {
      out.push_back(U'\\');
      for (char ch : std::to_string(static_cast<uint32_t>(c))) out.push_back(static_cast<char32_t>(ch));
      out.push_back(U';');
    }
  };
  for (char32_t c : run) {
    if (c == U'\\') {
      put(U'\\'), put(U'\\');
    } else if (c == U'_') {
      put(U'\\'), put(U'u');
    } else {
      put(c);
    }
  }
  out.push_back(U'_');
  return out;
}

CodePoints unescape_run(const CodePoints& escaped) {
  CodePoints out;
  std::size_t i = 0;
  while (i < escaped.size()) {
    if (escaped[i] == U'\\' && i + 1 < escaped.size()) {
      const char32_t next = escaped[i + 1];
      if (next == U'u' || next == U'\\') {
        out.push_back(next == U'u' ? U'_' : U'\\');
        i += 2;
        continue;
      }
      std::size_t j = i + 1;
      while (j < escaped.size() && escaped[j] >= U'0' && escaped[j] <= U'9') ++j;
      if (j > i + 1 && j < escaped.size() && escaped[j] == U';') {
        // Python's chr() accepts [0, 0x10FFFF] (surrogates included); larger is undefined.
        uint64_t v = 0;
        bool too_big = false;
        for (std::size_t k = i + 1; k < j; ++k) {
          v = v * 10 + (escaped[k] - U'0');
          if (v > 0x10ffff) too_big = true;
        }
        out.push_back(too_big ? kUndefined : static_cast<char32_t>(v));
        i = j + 1;
        continue;
      }
    }
    out.push_back(escaped[i++]);
  }
  return out;
}

SubwordTokenizer::SubwordTokenizer(std::vector<CodePoints> subtokens) {
  subtokens_ = {kPad, kEos};
  for (CodePoints& s : subtokens)
    if (!is_reserved(s)) subtokens_.push_back(std::move(s));
  for (std::size_t i = 0; i < subtokens_.size(); ++i) {
    const CodePoints& s = subtokens_[i];
    ST_CHECK(!s.empty(), "subword vocabulary: entry " << i << " is empty");
    // The first occurrence wins, as a Python dict built from the list would keep the last: a
    // vocabulary with duplicates is not one the reference writes, so refuse it.
    ST_CHECK(ids_.emplace(s, static_cast<int32_t>(i)).second,
             "subword vocabulary: entry " << i << " '" << utf8_encode(s) << "' appears twice");
    max_subtoken_length_ = std::max(max_subtoken_length_, s.size());
    alphabet_.insert(s.begin(), s.end());
  }
  alphabet_.insert(kEscapeChars.begin(), kEscapeChars.end());
}

SubwordTokenizer SubwordTokenizer::from_text(const std::string& bytes, const std::string& where) {
  std::vector<CodePoints> entries;
  std::istringstream in(bytes);
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    const std::string line_where = where + " line " + std::to_string(number);
    const CodePoints entry = strip(utf8_decode(line, line_where));
    if (entry.empty()) continue;
    ST_CHECK(entry.size() >= 2 && entry.front() == U'\'' && entry.back() == U'\'',
             line_where << ": expected a subtoken between single quotes, as 'abc_'");
    CodePoints s = entry.substr(1, entry.size() - 2);
    // Tensor2Tensor's files: '<pad>_' and '<EOS>_' are its reserved ids 0 and 1.
    if (entries.size() < 2 && (s == kPad + U"_" || s == kEos + U"_")) s.pop_back();
    entries.push_back(std::move(s));
  }
  ST_CHECK(entries.size() > 2, where << ": the vocabulary has " << entries.size() << " entries");
  return SubwordTokenizer(std::move(entries));
}

SubwordTokenizer SubwordTokenizer::from_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  ST_CHECK(in, path << ": cannot open the vocabulary file");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return from_text(bytes.str(), path);
}

std::string SubwordTokenizer::to_text() const {
  std::string out;
  for (const CodePoints& s : subtokens_) out += "'" + utf8_encode(s) + "'\n";
  return out;
}

void SubwordTokenizer::to_file(const std::string& path) const {
  std::ofstream out(path, std::ios::binary);
  ST_CHECK(out, path << ": cannot write the vocabulary file");
  out << to_text();
  ST_CHECK(out.flush(), path << ": write failed");
}

std::vector<int32_t> SubwordTokenizer::encode(const std::string& utf8, bool add_eos, const std::string& where) const {
  return encode(utf8_decode(utf8, where), add_eos);
}

std::vector<int32_t> SubwordTokenizer::encode(const CodePoints& text, bool add_eos) const {
  std::vector<int32_t> ids;
  for (const CodePoints& run : split_into_runs(text))
    greedy_split(escape_run(run, alphabet_), ids_, max_subtoken_length_,
                 [&](int32_t id, std::size_t) { ids.push_back(id); });
  if (add_eos) ids.push_back(kEosId);
  return ids;
}

std::string SubwordTokenizer::decode(const std::vector<int32_t>& ids) const {
  CodePoints joined;
  for (int32_t id : ids)
    if (id >= 0 && id < size()) joined += subtokens_[id];
  // Runs end in "_"; an escaped run holds no other "_".
  std::vector<CodePoints> runs;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= joined.size(); ++i)
    if (i == joined.size() || joined[i] == U'_') {
      if (i > start) runs.push_back(unescape_run(joined.substr(start, i - start)));
      start = i + 1;
    }
  CodePoints text;
  for (std::size_t k = 0; k < runs.size(); ++k) {
    if (k > 0 && is_alphanumeric(runs[k - 1].front()) && is_alphanumeric(runs[k].front())) text.push_back(U' ');
    text += runs[k];
  }
  return utf8_encode(text);
}

}  // namespace scaletrain::text
