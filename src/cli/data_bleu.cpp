// `scaletrain-data bleu --hypotheses FILE --references FILE [--cased] [--json]`: BLEU of a
// translation as MLPerf's Transformer reference scores it (text/bleu.hpp): uncased BLEU, the
// MLPerf metric, printed as the reference's compute_bleu.py prints it; --cased adds the
// case-sensitive score; --json prints both scores' parts. Rank 0 does it all; other ranks return.
#include <boost/program_options.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/data_subcommands.hpp"
#include "scaletrain/comm/agreement.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/json.hpp"
#include "scaletrain/core/log.hpp"
#include "scaletrain/text/bleu.hpp"

namespace po = boost::program_options;

namespace scaletrain::cli {
namespace {

std::string read_whole_file(const std::string& path) {
  std::error_code ec;
  ST_CHECK(!std::filesystem::is_directory(path, ec), path << ": is a directory, not a text file");
  std::ifstream in(path, std::ios::binary);
  ST_CHECK(in, path << ": cannot open (" << std::strerror(errno) << ")");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  ST_CHECK(!in.bad(), path << ": read failed");
  return bytes.str();
}

Json score_json(const text::BleuScore& s) {
  Json j = Json::object();
  j.set("bleu", s.bleu);
  j.set("brevity_penalty", s.brevity_penalty);
  j.set("geo_mean", s.geo_mean);
  j.set("hyp_len", s.hyp_len);
  j.set("ref_len", s.ref_len);
  j.set("precisions", Json::array_of(std::vector<double>(s.precisions.begin(), s.precisions.end())));
  j.set("matches", Json::array_of(std::vector<int64_t>(s.matches.begin(), s.matches.end())));
  j.set("possible", Json::array_of(std::vector<int64_t>(s.possible.begin(), s.possible.end())));
  j.set("note", s.note.empty() ? Json() : Json(s.note));
  return j;
}

}  // namespace

int bleu_main(int argc, char** argv) {
  std::string hypotheses, references;
  bool cased = false, json = false;
  po::options_description desc("options");
  desc.add_options()("help,h", "print this help")(
      "hypotheses", po::value(&hypotheses)->required(),
      "the translations to score: UTF-8 text, one sentence a line (compute_bleu.py's --translation)")(
      "references", po::value(&references)->required(),
      "the reference translations, line for line (compute_bleu.py's --reference)")(
      "cased", po::bool_switch(&cased),
      "also print case-sensitive BLEU, after the case-insensitive score (MLPerf's metric)")(
      "json", po::bool_switch(&json),
      "print one JSON object {\"hypotheses\", \"references\", \"lines\", \"uncased\": {bleu, brevity_penalty, "
      "geo_mean, hyp_len, ref_len, precisions, matches, possible, note}, \"cased\" (with --cased)}");
  po::variables_map vm;
  if (!parse_data_command(
          "bleu", argc, argv, desc, vm,
          "--hypotheses FILE --references FILE [--cased] [--json]\n\n"
          "BLEU as MLPerf's Transformer reference (compute_bleu.py) computes it: both files read\n"
          "whole, stripped, split into lines; lowered (unless cased); tokenised like\n"
          "mteval-v14 --international; corpus BLEU up to 4-grams, smoothed, with the brevity\n"
          "penalty; printed as the reference prints it ('Case-insensitive results: 27.319400787353516').\n"
          "Where the reference fails (no token at all) the score is 0 with a note."))
    return 0;
  // Rank 0 scores (a small job); under mpirun the others wait, so a missing file stops them all.
  comm::on_rank0_agreed(comm::Communicator::world(), [&] {
    const text::BleuText hyp = text::read_bleu_text(read_whole_file(hypotheses), hypotheses);
    const text::BleuText ref = text::read_bleu_text(read_whole_file(references), references);
    const text::BleuScore uncased = text::bleu_score(hyp, ref, false);
    text::BleuScore with_case;
    if (cased) with_case = text::bleu_score(hyp, ref, true);

    if (json) {
      Json out = Json::object();
      out.set("hypotheses", hypotheses);
      out.set("references", references);
      out.set("lines", static_cast<int64_t>(hyp.lines.size()));
      out.set("uncased", score_json(uncased));
      if (cased) out.set("cased", score_json(with_case));
      std::cout << out.dump(2) << "\n";
    } else {
      std::cout << "Case-insensitive results: " << text::format_bleu(uncased.bleu) << "\n";
      if (cased) std::cout << "Case-sensitive results: " << text::format_bleu(with_case.bleu) << "\n";
    }
    if (!uncased.note.empty()) std::cerr << "scaletrain-data bleu: note: " << uncased.note << "\n";
  });
  return 0;
}

}  // namespace scaletrain::cli
