// Corpus BLEU and chrF as sacreBLEU computes them by default, so that a score printed here is
// the score a paper would report for the same output:
//
//   BLEU: each line tokenised by the 13a tokeniser (mteval-v13a's), n-grams of 1 to 4 words
//         clipped by the most any one reference holds, the brevity penalty against the
//         reference closest in length to each line, the "exp" smoothing of a zero count;
//   chrF: character n-grams of 1 to 6 with whitespace removed, precision and recall averaged
//         over the orders both sides have, then F with beta = 2; with several references,
//         each line counts against its best one.
//
//   const metrics::Bleu b = metrics::corpus_bleu(hypotheses, {references});
//   fmt::print("BLEU {:.2f} chrF {:.2f}\n", b.score, metrics::corpus_chrf(hypotheses,
//   {references}));
//
// References come as streams, as sacreBLEU takes them: references[k][i] is the k-th reference
// of hypothesis i. Lines are UTF-8 (an invalid byte counts as one character).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tapegrad::metrics {

using References = std::vector<std::vector<std::string>>;

struct Bleu {
  double score = 0;                            // 0 to 100
  std::array<double, 4> precisions{};          // of 1- to 4-grams, in percent, smoothed
  std::array<int64_t, 4> matches{}, totals{};  // clipped matches and hypothesis n-grams
  double brevity_penalty = 0;
  int64_t hyp_len = 0, ref_len = 0;  // in 13a tokens
  // "BLEU 27.31 (62.5/35.1/21.0/13.2, BP 0.974, 1204/1236 tokens)"
  std::string describe() const;
};

// Throws Error when a reference stream's length differs from the hypotheses'.
Bleu corpus_bleu(const std::vector<std::string>& hypotheses, const References& references);

// 0 to 100. `beta` weighs recall beta times as much as precision.
double corpus_chrf(const std::vector<std::string>& hypotheses, const References& references,
                   double beta = 2);

// The 13a tokenisation of one line: punctuation and symbols split off, a period or comma split
// off unless it stands between digits, a dash after a digit split off, runs of whitespace one
// space.
std::string tokenize_13a(std::string_view line);

}  // namespace tapegrad::metrics
