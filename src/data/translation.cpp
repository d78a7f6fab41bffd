// The translation task's shards: reading a split whole with every check of
// docs/dataset-format.md ("Translation"), each error naming the file and sentence, and the writers.
#include "scaletrain/data/translation.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "data/shard_files.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/data/dataset.hpp"
#include "scaletrain/io/hdf5.hpp"
#include "scaletrain/text/subword_tokenizer.hpp"

namespace scaletrain::data {
namespace fs = std::filesystem;

void SentencePairs::add(const std::vector<int32_t>& source, const std::vector<int32_t>& target) {
  source_tokens.insert(source_tokens.end(), source.begin(), source.end());
  target_tokens.insert(target_tokens.end(), target.begin(), target.end());
  source_offsets.push_back(static_cast<int64_t>(source_tokens.size()));
  target_offsets.push_back(static_cast<int64_t>(target_tokens.size()));
}

namespace {

// none: nothing was cut (evaluation splits, kept whole; synthetic data); max_length is then the
// longest sentence.
const char* const kLengthMethods[] = {"discard", "truncate", "none"};

std::string string_attribute(const io::H5File& f, const char* name) {
  ST_CHECK(f.has_attribute(name),
           f.path() << ": missing root attribute '" << name << "' (a string; see docs/dataset-format.md, Translation)");
  return f.get_string_attribute(name);
}

int64_t int_attribute(const io::H5File& f, const char* name, int64_t min, int64_t max) {
  ST_CHECK(f.has_attribute(name), f.path() << ": missing root attribute '" << name
                                           << "' (an integer; see docs/dataset-format.md, Translation)");
  const int64_t v = f.get_int_attribute(name);
  ST_CHECK(v >= min && v <= max, f.path() << ": " << name << " = " << v << " is not in [" << min << ", " << max << "]");
  return v;
}

TranslationVocabulary read_vocabulary(const io::H5File& f) {
  TranslationVocabulary v;
  v.tokenizer = string_attribute(f, "tokenizer");
  ST_CHECK(v.tokenizer == text::kSubwordTokenizerName, f.path()
                                                           << ": tokenizer '" << v.tokenizer << "' is unknown (this "
                                                           << "build reads '" << text::kSubwordTokenizerName
                                                           << "', the MLPerf reference's subword tokenizer)");
  v.size = int_attribute(f, "vocab_size", 3, INT32_MAX);
  v.source_language = string_attribute(f, "source_language");
  v.target_language = string_attribute(f, "target_language");
  v.max_length = int_attribute(f, "max_length", 2, INT32_MAX);
  v.length_method = string_attribute(f, "length_method");
  ST_CHECK(std::find(std::begin(kLengthMethods), std::end(kLengthMethods), v.length_method) != std::end(kLengthMethods),
           f.path() << ": length_method '" << v.length_method << "' is not discard, truncate or none");
  const Shape shape = typed_dataset(f, "vocabulary", "uint8", 1, "[bytes] (the vocabulary file)");
  const Tensor bytes = f.read("vocabulary", DType::u8);
  v.text.assign(reinterpret_cast<const char*>(bytes.data<uint8_t>()), static_cast<std::size_t>(shape[0]));
  return v;
}

// The vocabulary of the first shard parses and has vocab_size entries.
void check_vocabulary_parses(const std::string& path, const TranslationVocabulary& v) {
  const text::SubwordTokenizer tokenizer = text::SubwordTokenizer::from_text(v.text, path + " dataset 'vocabulary'");
  ST_CHECK(tokenizer.size() == v.size,
           path << ": the vocabulary holds " << tokenizer.size() << " subtokens but vocab_size = " << v.size);
}

void check_same(const std::string& path, const TranslationVocabulary& a, const std::string& first,
                const TranslationVocabulary& b) {
  const auto differs = [&](const char* what, const std::string& x, const std::string& y) {
    ST_CHECK(x == y, path << ": " << what << " '" << x << "' but " << first << " has '" << y
                          << "' (all shards of a dataset share one vocabulary and its settings)");
  };
  differs("tokenizer", a.tokenizer, b.tokenizer);
  differs("source_language", a.source_language, b.source_language);
  differs("target_language", a.target_language, b.target_language);
  differs("length_method", a.length_method, b.length_method);
  differs("max_length", std::to_string(a.max_length), std::to_string(b.max_length));
  ST_CHECK(a.size == b.size && a.text == b.text, path << ": its vocabulary (" << a.size
                                                      << " subtokens) is not the one of " << first << " (" << b.size
                                                      << " subtokens): all shards of a dataset share one vocabulary");
}

// Offsets [N + 1] from 0, never decreasing, ending at the token count.
void check_offsets(const std::string& path, const char* name, const std::vector<int64_t>& o, int64_t tokens) {
  ST_CHECK(o.front() == 0, path << ": " << name << "[0] = " << o.front() << ", expected 0");
  for (std::size_t i = 1; i < o.size(); ++i)
    ST_CHECK(o[i] >= o[i - 1], path << ": " << name << "[" << i << "] = " << o[i] << " is below " << name << "["
                                    << i - 1 << "] = " << o[i - 1] << " (offsets must not decrease)");
  ST_CHECK(o.back() == tokens, path << ": " << name << " ends at " << o.back() << " but the tokens dataset holds "
                                    << tokens << " ids (the offsets do not add up)");
}

// Every sentence: not empty, ids in [2, V) before its final end-of-sentence id, at most max_length.
void check_sentences(const std::string& path, const char* side, const int32_t* tokens,
                     const std::vector<int64_t>& offsets, const TranslationVocabulary& v) {
  for (std::size_t s = 0; s + 1 < offsets.size(); ++s) {
    const int64_t b = offsets[s], e = offsets[s + 1];
    ST_CHECK(e - b >= 2, path << ": " << side << " sentence " << s << " is empty ("
                              << (e == b ? "no ids" : "only the end-of-sentence id") << ")");
    ST_CHECK(e - b <= v.max_length, path << ": " << side << " sentence " << s << " has " << e - b
                                         << " ids, more than max_length " << v.max_length);
    ST_CHECK(tokens[e - 1] == text::kEosId, path << ": " << side << " sentence " << s << " ends in id " << tokens[e - 1]
                                                 << ", not the end-of-sentence id " << text::kEosId);
    for (int64_t t = b; t < e - 1; ++t) {
      const int32_t id = tokens[t];
      ST_CHECK(id != text::kPadId,
               path << ": " << side << " sentence " << s << " holds the padding id 0 at position " << t - b);
      ST_CHECK(id >= 0 && id < v.size, path << ": " << side << " sentence " << s << " holds id " << id
                                            << " at position " << t - b << ", outside the vocabulary [0, " << v.size
                                            << ")");
    }
  }
}

template <typename T>
std::vector<T> read_vector(const io::H5File& f, const char* name, DType dtype, int64_t count) {
  std::vector<T> v(static_cast<std::size_t>(count));
  if (count == 0) return v;
  const Tensor t = f.read(name, dtype);
  std::memcpy(v.data(), t.data<T>(), v.size() * sizeof(T));
  return v;
}

// One side of one shard: tokens and offsets, checked, appended to `tokens` and `offsets`.
int64_t read_side(const io::H5File& f, const char* side, const TranslationVocabulary& v, std::vector<int32_t>& tokens,
                  std::vector<int64_t>& offsets) {
  const std::string tokens_name = std::string(side) + "_tokens", offsets_name = std::string(side) + "_offsets";
  const int64_t n_tokens = typed_dataset(f, tokens_name.c_str(), "int32", 1, "[tokens]")[0];
  const int64_t n_offsets = typed_dataset(f, offsets_name.c_str(), "int64", 1, "[sentences + 1]")[0];
  ST_CHECK(n_offsets >= 1, f.path() << ": dataset '" << offsets_name << "' is empty (it holds sentences + 1 offsets)");
  const std::vector<int32_t> t = read_vector<int32_t>(f, tokens_name.c_str(), DType::i32, n_tokens);
  const std::vector<int64_t> o = read_vector<int64_t>(f, offsets_name.c_str(), DType::i64, n_offsets);
  check_offsets(f.path(), offsets_name.c_str(), o, n_tokens);
  check_sentences(f.path(), side, t.data(), o, v);
  const int64_t base = static_cast<int64_t>(tokens.size());
  tokens.insert(tokens.end(), t.begin(), t.end());
  for (std::size_t i = 1; i < o.size(); ++i) offsets.push_back(base + o[i]);
  return n_offsets - 1;
}

void read_translation_shard(const std::string& path, TranslationSplit& s) {
  io::H5File f(path, io::H5File::Mode::read);
  ST_CHECK(f.has_attribute("scaletrain_format"),
           path << ": missing root attribute 'scaletrain_format' (not a scaletrain dataset shard?)");
  const int64_t version = f.get_int_attribute("scaletrain_format");
  ST_CHECK(version == kFormatVersion, path << ": dataset format version " << version
                                           << " is not supported for translation (expected " << kFormatVersion << ")");
  ST_CHECK(f.has_attribute("task"), path << ": missing root attribute 'task' (a string)");
  const std::string task = f.get_string_attribute("task");
  ST_CHECK(task == kTaskTranslation,
           path << ": task '" << task << "', expected '" << kTaskTranslation << "' (a translation split)");
  const TranslationVocabulary v = read_vocabulary(f);
  if (s.shards.empty()) {
    check_vocabulary_parses(path, v);
    s.vocabulary = v;
  } else {
    check_same(path, v, s.shards.front(), s.vocabulary);
  }
  const int64_t sources = read_side(f, "source", v, s.pairs.source_tokens, s.pairs.source_offsets);
  const int64_t targets = read_side(f, "target", v, s.pairs.target_tokens, s.pairs.target_offsets);
  ST_CHECK(sources == targets,
           path << ": " << sources << " source sentences but " << targets << " target sentences (they come in pairs)");
  s.shards.push_back(path);
  s.shard_rows.push_back(sources);
}

template <typename T>
Tensor vector_tensor(const T* data, int64_t n, DType dtype) {
  Tensor t = Tensor::empty({n}, dtype);
  if (n > 0) std::memcpy(t.data<T>(), data, static_cast<std::size_t>(n) * sizeof(T));
  return t;
}

// Pairs [begin, end) of one side as a shard stores them: the first pair's ids, and offsets from 0.
struct ShardSide {
  const char* name;
  const int32_t* tokens;
  std::vector<int64_t> offsets;
};

ShardSide shard_side(const char* name, const std::vector<int32_t>& tokens, const std::vector<int64_t>& offsets,
                     int64_t begin, int64_t end) {
  ShardSide s{name, tokens.data() + offsets[begin], {offsets.begin() + begin, offsets.begin() + end + 1}};
  for (int64_t& o : s.offsets) o -= offsets[begin];
  return s;
}

void write_side(io::H5File& f, const ShardSide& s) {
  f.write(std::string(s.name) + "_tokens", vector_tensor(s.tokens, s.offsets.back(), DType::i32));
  f.write(std::string(s.name) + "_offsets",
          vector_tensor(s.offsets.data(), static_cast<int64_t>(s.offsets.size()), DType::i64));
}

}  // namespace

TranslationSplit open_translation_split(const std::string& dataset_dir, const std::string& split) {
  TranslationSplit s;
  s.dir = (fs::path(dataset_dir) / split).string();
  const std::vector<std::string> paths = shard_paths(dataset_dir, split);
  // Sizes first: a shard cut short or still being copied never reaches HDF5.
  s.manifest = read_manifest(s.dir);
  if (s.manifest) check_manifest_sizes(*s.manifest, paths);
  s.unchecked_shards = unchecked_shards(paths, s.manifest);
  for (const std::string& path : paths) read_translation_shard(path, s);
  ST_CHECK(s.pairs.size() > 0, s.dir << ": the shards hold no sentence pairs (an empty split)");
  return s;
}

void check_same_vocabulary(const TranslationSplit& a, const TranslationSplit& b) {
  ST_CHECK(a.vocabulary.text == b.vocabulary.text && a.vocabulary.tokenizer == b.vocabulary.tokenizer,
           a.dir << " and " << b.dir << " use different vocabularies (" << a.vocabulary.size << " and "
                 << b.vocabulary.size << " subtokens): convert both splits in one run of scaletrain-data translation, "
                 << "or with the same --vocabulary file");
  ST_CHECK(a.vocabulary.source_language == b.vocabulary.source_language &&
               a.vocabulary.target_language == b.vocabulary.target_language,
           a.dir << " translates " << a.vocabulary.source_language << " to " << a.vocabulary.target_language << " but "
                 << b.dir << " " << b.vocabulary.source_language << " to " << b.vocabulary.target_language);
}

void write_translation_shard(const std::string& path, const TranslationVocabulary& v, const SentencePairs& pairs,
                             int64_t begin, int64_t end) {
  ST_CHECK(begin >= 0 && begin <= end && end <= pairs.size(),
           path << ": pairs [" << begin << ", " << end << ") of " << pairs.size());
  const ShardSide sides[] = {shard_side("source", pairs.source_tokens, pairs.source_offsets, begin, end),
                             shard_side("target", pairs.target_tokens, pairs.target_offsets, begin, end)};
  // The reader's checks, before anything is written.
  for (const ShardSide& s : sides) check_sentences(path, s.name, s.tokens, s.offsets, v);
  {
    io::H5File f(path + ".tmp", io::H5File::Mode::create_truncate);
    f.set_attribute("scaletrain_format", int64_t(kFormatVersion));
    f.set_fixed_string_attribute("task", kTaskTranslation);
    f.set_attribute("tokenizer", v.tokenizer);
    f.set_attribute("vocab_size", v.size);
    f.set_attribute("source_language", v.source_language);
    f.set_attribute("target_language", v.target_language);
    f.set_attribute("max_length", v.max_length);
    f.set_attribute("length_method", v.length_method);
    f.write("vocabulary", vector_tensor(reinterpret_cast<const uint8_t*>(v.text.data()),
                                        static_cast<int64_t>(v.text.size()), DType::u8));
    for (const ShardSide& s : sides) write_side(f, s);
    f.close();
  }
  publish_shard(path);
}

void write_translation_split(const std::string& output, const std::string& split, const TranslationVocabulary& v,
                             const SentencePairs& pairs, int64_t shards, int rank, int ranks) {
  const int64_t count = std::max<int64_t>(1, std::min(shards, pairs.size()));
  for (int64_t i = rank; i < count; i += ranks) {
    const auto [b, e] = shard_range(pairs.size(), i, count);
    write_translation_shard((fs::path(output) / split / shard_file_name(i, count)).string(), v, pairs, b, e);
  }
}

}  // namespace scaletrain::data
