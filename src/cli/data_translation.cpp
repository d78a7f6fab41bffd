// scaletrain-data for the translation task (docs/dataset-format.md, "Translation"):
// `translation` converts plain-text sentence pairs into shards with the MLPerf Transformer's
// subword vocabulary (built as the reference builds it, or read from a file);
// `synthetic --task translation` writes copy or reverse tasks for tests; and inspect's
// description of a translation split. Rank 0 builds the vocabulary and broadcasts it; every rank
// encodes every pair (so each knows which pairs the length filter keeps) and writes shard i of
// a split when i mod P is its rank; rank 0 then re-opens every split with its checks.
#include <mpi.h>

#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "cli/data_subcommands.hpp"
#include "scaletrain/comm/agreement.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/json.hpp"
#include "scaletrain/core/rng.hpp"
#include "scaletrain/core/timer.hpp"
#include "scaletrain/data/translation.hpp"
#include "scaletrain/text/subword_tokenizer.hpp"

namespace po = boost::program_options;

namespace scaletrain::cli {
namespace {

// Lines of a text file without their newline (a final line without one counts).
std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  ST_CHECK(in, path << ": cannot open (a text file, one sentence a line)");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(std::move(line));
  return lines;
}

// One split's text: aligned source and target lines and where they came from.
struct TextPairs {
  std::vector<std::string> source, target;
  std::string source_where, target_where;  // file names (the same file for a TSV)
  double source_bytes = 0, target_bytes = 0;
  bool tsv = false;
};

TextPairs read_text_pairs(const std::string& split, const std::string& source, const std::string& target,
                          const std::string& tsv) {
  TextPairs t;
  if (!tsv.empty()) {
    t.tsv = true;
    t.source_where = t.target_where = tsv;
    int64_t number = 0;
    for (std::string& line : read_lines(tsv)) {
      ++number;
      const std::size_t tab = line.find('\t');
      ST_CHECK(tab != std::string::npos && line.find('\t', tab + 1) == std::string::npos,
               tsv << " line " << number << ": expected one tab between the source and the target sentence, found "
                   << std::count(line.begin(), line.end(), '\t'));
      t.source.push_back(line.substr(0, tab));
      t.target.push_back(line.substr(tab + 1));
      t.source_bytes += static_cast<double>(tab + 1);
      t.target_bytes += static_cast<double>(line.size() - tab);
    }
  } else {
    t.source = read_lines(source);
    t.target = read_lines(target);
    t.source_where = source;
    t.target_where = target;
    t.source_bytes = static_cast<double>(std::filesystem::file_size(source));
    t.target_bytes = static_cast<double>(std::filesystem::file_size(target));
    ST_CHECK(t.source.size() == t.target.size(), split << ": " << source << " has " << t.source.size() << " lines but "
                                                       << target << " has " << t.target.size()
                                                       << " (line i of one translates line i of the other)");
  }
  return t;
}

// How the pairs of one split fared.
struct Encoded {
  data::SentencePairs pairs;
  int64_t lines = 0, empty = 0, too_long = 0, truncated = 0;
  int64_t longest = 0;  // tokens of the longest side kept, end of sentence included
};

Encoded encode_pairs(const TextPairs& text, const text::SubwordTokenizer& tokenizer, int64_t max_length,
                     const std::string& method) {
  Encoded e;
  e.lines = static_cast<int64_t>(text.source.size());
  // Lines are stripped as the reference strips them: white space alone is no sentence.
  const auto encode = [&](const std::string& line, const std::string& file, std::size_t i) {
    return tokenizer.encode(text::strip(text::utf8_decode(line, file + " line " + std::to_string(i + 1))), true);
  };
  for (std::size_t i = 0; i < text.source.size(); ++i) {
    std::vector<int32_t> s = encode(text.source[i], text.source_where, i);
    std::vector<int32_t> t = encode(text.target[i], text.target_where, i);
    if (s.size() < 2 || t.size() < 2) {
      ++e.empty;
      continue;
    }
    if (max_length > 0 &&
        (static_cast<int64_t>(s.size()) > max_length || static_cast<int64_t>(t.size()) > max_length)) {
      if (method == "discard") {
        ++e.too_long;
        continue;
      }
      ++e.truncated;
      for (auto* side : {&s, &t})
        if (static_cast<int64_t>(side->size()) > max_length) {
          side->resize(static_cast<std::size_t>(max_length));
          side->back() = text::kEosId;
        }
    }
    e.longest = std::max<int64_t>(e.longest, std::max(s.size(), t.size()));
    e.pairs.add(s, t);
  }
  return e;
}

// Rank 0 builds the vocabulary from the training text (both sides, each sampled as the reference
// samples a file) or reads it; every rank receives its file text.
std::string vocabulary_text(const Ranks& ranks, const TextPairs& train, const std::string& vocabulary_file,
                            const text::VocabularyOptions& options, double sample_chars, int64_t& min_count) {
  std::string bytes;
  int64_t used = 0;
  if (ranks.rank == 0) {
    if (!vocabulary_file.empty()) {
      bytes = text::SubwordTokenizer::from_file(vocabulary_file).to_text();
    } else {
      text::RunCounts counts;
      text::count_runs_in_lines(train.source, train.source_bytes, sample_chars, counts, train.source_where);
      text::count_runs_in_lines(train.target, train.target_bytes, sample_chars, counts, train.target_where);
      text::BuiltVocabulary built = text::build_vocabulary(counts, options);
      used = built.min_count;
      bytes = text::SubwordTokenizer(std::move(built.subtokens)).to_text();
    }
  }
  int64_t size = static_cast<int64_t>(bytes.size());
  ST_CHECK_MPI(MPI_Bcast(&size, 1, MPI_INT64_T, 0, MPI_COMM_WORLD));
  ST_CHECK_MPI(MPI_Bcast(&used, 1, MPI_INT64_T, 0, MPI_COMM_WORLD));
  bytes.resize(static_cast<std::size_t>(size));
  ST_CHECK_MPI(MPI_Bcast(bytes.data(), static_cast<int>(size), MPI_CHAR, 0, MPI_COMM_WORLD));
  min_count = used;
  return bytes;
}

void report_split(const std::string& split, const Encoded& e, const std::string& method) {
  std::cout << split << ": " << e.pairs.size() << " pairs of " << e.lines << " lines";
  if (e.empty) std::cout << ", " << e.empty << " dropped with an empty side";
  if (method == "discard" || e.too_long) std::cout << ", " << e.too_long << " discarded as too long";
  if (method == "truncate") std::cout << ", " << e.truncated << " truncated";
  std::cout << "; longest side " << e.longest << " tokens\n";
}

// Writes the splits, their manifests, then rank 0 re-opens and describes them.
void write_and_report(const Ranks& ranks, const std::string& output,
                      const std::vector<std::pair<std::string, data::TranslationVocabulary>>& splits,
                      const std::vector<const data::SentencePairs*>& pairs, int64_t shards, const Stopwatch& clock) {
  for (std::size_t i = 0; i < splits.size(); ++i)
    data::write_translation_split(output, splits[i].first, splits[i].second, *pairs[i], shards, ranks.rank, ranks.size);
  ST_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  std::vector<std::string> names;
  for (const auto& s : splits) names.push_back(s.first);
  write_manifests(output, names);
  comm::on_rank0_agreed(comm::Communicator::world(), [&] {
    std::vector<data::TranslationSplit> opened;
    for (const std::string& name : names) opened.push_back(data::open_translation_split(output, name));
    for (std::size_t i = 1; i < opened.size(); ++i) data::check_same_vocabulary(opened[0], opened[i]);
    for (const auto& s : opened) print_translation_split(s, false);
    std::cout << "wrote " << output << " in " << std::fixed << std::setprecision(1) << clock.elapsed() << " s with "
              << ranks.size << " rank" << (ranks.size == 1 ? "" : "s") << "\n";
  });
}

// A split's text options: --NAME-source and --NAME-target, or --NAME-tsv.
struct SplitFiles {
  std::string source, target, tsv;
  bool given() const { return !source.empty() || !target.empty() || !tsv.empty(); }
  void check(const std::string& name) const {
    if (!tsv.empty() && (!source.empty() || !target.empty()))
      throw UsageError("translation: give --" + name + "-tsv or --" + name + "-source with --" + name +
                       "-target, not both");
    if (tsv.empty() && source.empty() != target.empty())
      throw UsageError("translation: --" + name + "-source and --" + name + "-target go together (line i of one " +
                       "translates line i of the other)");
  }
};

}  // namespace

void print_translation_split(const data::TranslationSplit& s, bool shards) {
  const data::SentencePairs& p = s.pairs;
  const auto tokens = [](const std::vector<int64_t>& o) { return o.back(); };
  std::cout << "split " << std::filesystem::path(s.dir).filename().string() << ": task " << data::kTaskTranslation
            << " " << s.vocabulary.source_language << " -> " << s.vocabulary.target_language << ", " << p.size()
            << " sentence pairs, " << tokens(p.source_offsets) << " source and " << tokens(p.target_offsets)
            << " target tokens in " << s.shards.size() << " shard" << (s.shards.size() == 1 ? "" : "s") << "\n";
  std::cout << "  vocabulary " << s.vocabulary.size << " subtokens (" << s.vocabulary.tokenizer << "), max_length "
            << s.vocabulary.max_length << " (" << s.vocabulary.length_method << ")\n";
  print_manifest_line(s.manifest);
  if (shards)
    for (std::size_t i = 0; i < s.shards.size(); ++i)
      std::cout << "  " << s.shards[i] << "  " << s.shard_rows[i] << " pairs\n";
  print_unchecked_shards(s.unchecked_shards);
}

Json translation_split_json(const data::TranslationSplit& s) {
  Json j = Json::object();
  j.set("dir", s.dir);
  j.set("task", data::kTaskTranslation);
  j.set("source_language", s.vocabulary.source_language);
  j.set("target_language", s.vocabulary.target_language);
  j.set("tokenizer", s.vocabulary.tokenizer);
  j.set("vocab_size", s.vocabulary.size);
  j.set("max_length", s.vocabulary.max_length);
  j.set("length_method", s.vocabulary.length_method);
  j.set("rows", s.pairs.size());
  j.set("source_tokens", s.pairs.source_offsets.back());
  j.set("target_tokens", s.pairs.target_offsets.back());
  j.set("manifest", s.manifest ? Json(s.manifest->path) : Json());
  j.set("shards", shards_json(s.shards, s.shard_rows));
  j.set("unchecked_shards", Json::array_of(s.unchecked_shards));
  return j;
}

int translation_main(int argc, char** argv) {
  SplitFiles train, val;
  std::string output, vocabulary, method = "discard", source_language = "en", target_language = "de";
  int64_t shards = 1, max_length = data::kReferenceMaxLength;
  text::VocabularyOptions vocab;
  double sample_chars = 1e6;
  bool overwrite = false;
  po::options_description desc("options");
  desc.add_options()("help,h", "print this help")("train-source", po::value(&train.source),
                                                  "training sentences in the source language, one a line")(
      "train-target", po::value(&train.target), "their translations, line i of one for line i of the other")(
      "train-tsv", po::value(&train.tsv), "instead: one pair a line, source TAB target")(
      "val-source", po::value(&val.source),
      "evaluation sentences (OUTPUT/val, translated for BLEU; MLPerf: newstest2014.en); optional")(
      "val-target", po::value(&val.target), "their reference translations (MLPerf: newstest2014.de)")(
      "val-tsv", po::value(&val.tsv), "instead: evaluation pairs, source TAB target")(
      "output", po::value(&output)->required(), "dataset directory to write: OUTPUT/train and OUTPUT/val")(
      "vocabulary", po::value(&vocabulary),
      "use this vocabulary file (one 'subtoken' a line, e.g. the reference's vocab.ende.32768 or "
      "vocab.translate_ende_wmt32k.32768.subwords) instead of building one from the training text")(
      "min-count", po::value(&vocab.min_count)->default_value(vocab.min_count),
      "building: keep subtokens seen at least this often (the reference: 6)")(
      "target-vocab-size", po::value(&vocab.target_size)->default_value(0),
      "building: search min-count in [1, 1000] for a vocabulary of about this size instead (the reference's "
      "--search, 32768, accepting within 1%); 0: use --min-count")(
      "vocab-sample-chars", po::value(&sample_chars)->default_value(sample_chars),
      "building: characters sampled from each side's text, lines spread evenly (the reference's 1e6); 0: all")(
      "max-length", po::value(&max_length)->default_value(max_length),
      "training pairs with a side longer than this many tokens (end of sentence included) are handled by "
      "--length-method (MLPerf: 256); evaluation pairs are kept whole, as the reference translates its BLEU set whole")(
      "length-method", po::value(&method)->default_value(method),
      "discard (the reference) or truncate (keep the first max-length - 1 tokens and the end of sentence)")(
      "source-language", po::value(&source_language)->default_value(source_language), "recorded in the shards")(
      "target-language", po::value(&target_language)->default_value(target_language), "recorded in the shards")(
      "shards", po::value(&shards)->default_value(shards), "shards per split (ranks under mpirun share them)")(
      "overwrite", po::bool_switch(&overwrite), "replace shards already in OUTPUT/train and OUTPUT/val");
  po::variables_map vm;
  if (!parse_data_command("translation", argc, argv, desc, vm,
                          "(--train-source F --train-target F | --train-tsv F) [--val-source F --val-target F | "
                          "--val-tsv F] --output DIR [options]"))
    return 0;
  train.check("train");
  val.check("val");
  if (!train.given())
    throw UsageError("translation: give the training text: --train-source F --train-target F, or --train-tsv F");
  if (method != "discard" && method != "truncate")
    throw UsageError("translation: --length-method '" + method + "' is neither discard nor truncate");
  require_range("translation", "max-length", max_length, 2, INT32_MAX, " (tokens, end of sentence included)");
  require_range("translation", "min-count", vocab.min_count, 1, INT32_MAX);
  require_range("translation", "target-vocab-size", vocab.target_size, 0, INT32_MAX);
  require_range("translation", "shards", shards, 1, 1000000);
  if (sample_chars < 0) throw UsageError("translation: --vocab-sample-chars must be 0 (all) or positive");
  if (!vocabulary.empty() && (vm["min-count"].defaulted() == false || vocab.target_size > 0))
    throw UsageError("translation: --vocabulary reads a vocabulary; --min-count and --target-vocab-size build one");

  const Ranks ranks;
  Stopwatch clock;
  const TextPairs train_text = read_text_pairs("train", train.source, train.target, train.tsv);
  int64_t min_count = 0;
  const std::string vocab_text = vocabulary_text(ranks, train_text, vocabulary, vocab, sample_chars, min_count);
  const text::SubwordTokenizer tokenizer = text::SubwordTokenizer::from_text(vocab_text, "the vocabulary");
  if (ranks.rank == 0)
    std::cout << "vocabulary: " << tokenizer.size() << " subtokens "
              << (vocabulary.empty() ? "built with min count " + std::to_string(min_count) : "from " + vocabulary)
              << "\n";
  data::TranslationVocabulary v{
      text::kSubwordTokenizerName, vocab_text, tokenizer.size(), source_language, target_language, max_length, method};
  const Encoded train_pairs = encode_pairs(train_text, tokenizer, max_length, method);
  if (ranks.rank == 0) report_split("train", train_pairs, method);
  ST_CHECK(train_pairs.pairs.size() > 0, "translation: no training pair is left ("
                                             << train_pairs.empty << " with an empty side, " << train_pairs.too_long
                                             << " too long)");
  std::vector<std::pair<std::string, data::TranslationVocabulary>> splits{{"train", v}};
  std::vector<const data::SentencePairs*> pairs{&train_pairs.pairs};
  Encoded val_pairs;
  if (val.given()) {
    val_pairs = encode_pairs(read_text_pairs("val", val.source, val.target, val.tsv), tokenizer, 0, method);
    if (ranks.rank == 0) report_split("val", val_pairs, "none");
    ST_CHECK(val_pairs.pairs.size() > 0, "translation: no evaluation pair is left (all have an empty side)");
    data::TranslationVocabulary kept_whole = v;
    kept_whole.max_length = std::max<int64_t>(2, val_pairs.longest);
    kept_whole.length_method = "none";
    splits.emplace_back("val", kept_whole);
    pairs.push_back(&val_pairs.pairs);
  }
  std::vector<std::string> names;
  for (const auto& s : splits) names.push_back(s.first);
  prepare_output(ranks.rank, output, names, overwrite);
  write_and_report(ranks, output, splits, pairs, shards, clock);
  return 0;
}

int synthetic_translation_main(int argc, char** argv) {
  std::string task, output, kind = "copy";
  int64_t sentences = 0, val_sentences = -1, words = 32, min_length = 2, max_length = 12, shards = 1;
  uint64_t seed = 0;
  bool overwrite = false;
  po::options_description desc("options");
  desc.add_options()("help,h", "print this help")("task", po::value(&task)->required(), "translation")(
      "kind", po::value(&kind)->default_value(kind),
      "copy (the target is the source) or reverse (the source backwards): tasks a model solves only by "
      "attending to the right source position")("sentences", po::value(&sentences)->required(),
                                                "training pairs (OUTPUT/train)")(
      "val-sentences", po::value(&val_sentences), "evaluation pairs (OUTPUT/val); default max(1, sentences / 10)")(
      "words", po::value(&words)->default_value(words), "distinct words W; the vocabulary holds each as one subtoken")(
      "min-length", po::value(&min_length)->default_value(min_length), "words a sentence, at least")(
      "max-length", po::value(&max_length)->default_value(max_length), "words a sentence, at most")(
      "shards", po::value(&shards)->default_value(shards), "shards per split")("output", po::value(&output)->required(),
                                                                               "dataset directory to write")(
      "seed", po::value(&seed)->default_value(seed), "the data depends only on the seed, not on shards or ranks")(
      "overwrite", po::bool_switch(&overwrite), "replace shards already in OUTPUT/train and OUTPUT/val");
  po::variables_map vm;
  if (!parse_data_command("synthetic", argc, argv, desc, vm, "--task translation --sentences N --output DIR [options]"))
    return 0;
  const std::string cmd = "synthetic --task translation";
  if (kind != "copy" && kind != "reverse")
    throw UsageError(cmd + ": --kind '" + kind + "' is neither copy nor reverse");
  require_range(cmd, "sentences", sentences, 1, INT32_MAX);
  if (val_sentences < 0) val_sentences = std::max<int64_t>(1, sentences / 10);
  require_range(cmd, "val-sentences", val_sentences, 1, INT32_MAX);
  require_range(cmd, "words", words, 1, 1000000);
  require_range(cmd, "min-length", min_length, 1, 100000);
  require_range(cmd, "max-length", max_length, min_length, 100000, " (at least --min-length)");
  require_range(cmd, "shards", shards, 1, 1000000);

  const Ranks ranks;
  Stopwatch clock;
  // Word w is the subtoken "wordW_" (a whole alphanumeric run), so a sentence decodes to
  // "word3 word17 ..."; the characters are subtokens too, so any text can be encoded.
  std::vector<text::CodePoints> subtokens;
  for (int64_t w = 0; w < words; ++w) subtokens.push_back(text::utf8_decode("word" + std::to_string(w) + "_", ""));
  for (char32_t c : std::u32string(U"word0123456789_\\u;")) subtokens.emplace_back(1, c);
  std::vector<text::CodePoints> unique;
  for (auto& s : subtokens)
    if (std::find(unique.begin(), unique.end(), s) == unique.end()) unique.push_back(s);
  const text::SubwordTokenizer tokenizer(unique);
  data::TranslationVocabulary v{text::kSubwordTokenizerName,
                                tokenizer.to_text(),
                                tokenizer.size(),
                                "synthetic",
                                "synthetic-" + kind,
                                max_length + 1,
                                "none"};
  const auto make = [&](int64_t n, uint64_t stream) {
    data::SentencePairs p;
    Rng rng = Rng::derive(seed, stream);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t len = min_length + static_cast<int64_t>(rng.below(max_length - min_length + 1));
      std::vector<int32_t> s;
      for (int64_t k = 0; k < len; ++k) s.push_back(2 + static_cast<int32_t>(rng.below(words)));
      std::vector<int32_t> t = s;
      if (kind == "reverse") std::reverse(t.begin(), t.end());
      s.push_back(text::kEosId);
      t.push_back(text::kEosId);
      p.add(s, t);
    }
    return p;
  };
  const data::SentencePairs train = make(sentences, 1), val = make(val_sentences, 2);
  prepare_output(ranks.rank, output, {"train", "val"}, overwrite);
  write_and_report(ranks, output, {{"train", v}, {"val", v}}, {&train, &val}, shards, clock);
  return 0;
}

}  // namespace scaletrain::cli
