// BLEU and chrF from their sufficient statistics: per line, counts of n-grams and matches,
// summed over the corpus, then one score. Text is handled as sacreBLEU's Python does: lines of
// Unicode code points, split at Unicode whitespace.
#include "tapegrad/metrics/translation.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "tapegrad/autograd/error.h"

namespace tapegrad::metrics {

namespace {

// The code points of UTF-8 text; an invalid byte is one code point of its own (U+FFFD + byte,
// so that two different invalid bytes stay different).
std::u32string code_points(std::string_view s) {
  std::u32string out;
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    bool valid = n > 0 && i + n <= s.size();
    char32_t c = n == 1 ? b : b & (0x7f >> n);
    for (size_t k = 1; valid && k < n; ++k) {
      const auto next = static_cast<unsigned char>(s[i + k]);
      valid = (next >> 6) == 2;
      c = (c << 6) | (next & 0x3f);
    }
    out.push_back(valid ? c : 0x110000 + b);
    i += valid ? n : 1;
  }
  return out;
}

// Python's str.isspace(): what str.split() splits at.
bool is_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
         c == 0x205f || c == 0x3000;
}

// Python's text.split(): the runs of non-whitespace.
std::vector<std::u32string> split(const std::u32string& text) {
  std::vector<std::u32string> words;
  std::u32string word;
  for (const char32_t c : text) {
    if (!is_space(c)) {
      word.push_back(c);
    } else if (!word.empty()) {
      words.push_back(std::move(word));
      word.clear();
    }
  }
  if (!word.empty()) words.push_back(std::move(word));
  return words;
}

std::string utf8(const std::u32string& text) {
  std::string out;
  for (const char32_t c : text) {
    if (c >= 0x110000) {
      out.push_back(static_cast<char>(c - 0x110000));
    } else if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      out += {static_cast<char>(0xc0 | (c >> 6)), static_cast<char>(0x80 | (c & 0x3f))};
    } else if (c < 0x10000) {
      out += {static_cast<char>(0xe0 | (c >> 12)), static_cast<char>(0x80 | ((c >> 6) & 0x3f)),
              static_cast<char>(0x80 | (c & 0x3f))};
    } else {
      out += {static_cast<char>(0xf0 | (c >> 18)), static_cast<char>(0x80 | ((c >> 12) & 0x3f)),
              static_cast<char>(0x80 | ((c >> 6) & 0x3f)), static_cast<char>(0x80 | (c & 0x3f))};
    }
  }
  return out;
}

void replace_all(std::u32string& s, std::u32string_view from, std::u32string_view to) {
  for (size_t at = s.find(from); at != std::u32string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

bool is_digit(char32_t c) { return c >= U'0' && c <= U'9'; }

// 13a's symbols: { | } ~ [ \ ] ^ _ ` space ! " # $ % & ( ) * + : ; < = > ? @ /
bool is_symbol(char32_t c) {
  return (c >= U'{' && c <= U'~') || (c >= U'[' && c <= U'`') || (c >= U' ' && c <= U'&') ||
         (c >= U'(' && c <= U'+') || (c >= U':' && c <= U'@') || c == U'/';
}

// One pass of a two-character rule left to right, as a regular expression substitution makes
// it: where `match(a, b)` holds, the pair is replaced by `apply(a, b)` and the scan goes on
// after it.
template <class Match, class Apply>
std::u32string pairs(const std::u32string& s, Match match, Apply apply) {
  std::u32string out;
  size_t i = 0;
  for (; i + 1 < s.size(); ++i) {
    if (match(s[i], s[i + 1])) {
      out += apply(s[i], s[i + 1]);
      ++i;
    } else {
      out.push_back(s[i]);
    }
  }
  if (i < s.size()) out.push_back(s[i]);
  return out;
}

// N-gram counts of one line, for n = 1 .. N, keyed by the n-gram's text.
using Counts = std::map<std::u32string, int64_t>;

// Word n-grams of 1 to 4 words, each joined by a separator no word holds.
std::array<Counts, 4> word_ngrams(const std::vector<std::u32string>& words) {
  std::array<Counts, 4> counts;
  for (size_t n = 1; n <= 4; ++n) {
    for (size_t i = 0; i + n <= words.size(); ++i) {
      std::u32string key = words[i];
      for (size_t k = 1; k < n; ++k) key += U'\n' + words[i + k];
      ++counts[n - 1][key];
    }
  }
  return counts;
}

// 13a's tokens of a line, as code points (tokenize_13a joins them).
std::vector<std::u32string> words_13a(std::u32string s) {
  replace_all(s, U"<skipped>", U"");
  replace_all(s, U"-\n", U"");
  replace_all(s, U"\n", U" ");
  replace_all(s, U"&quot;", U"\"");
  replace_all(s, U"&amp;", U"&");
  replace_all(s, U"&lt;", U"<");
  replace_all(s, U"&gt;", U">");
  std::u32string spaced = U" ";
  for (const char32_t c : s) {
    if (is_symbol(c)) {
      spaced += {U' ', c, U' '};
    } else {
      spaced.push_back(c);
    }
  }
  spaced.push_back(U' ');
  const auto period = [](char32_t c) { return c == U'.' || c == U','; };
  spaced = pairs(
      spaced, [&](char32_t a, char32_t b) { return !is_digit(a) && period(b); },
      [](char32_t a, char32_t b) {
        return std::u32string{a, U' ', b, U' '};
      });
  spaced = pairs(
      spaced, [&](char32_t a, char32_t b) { return period(a) && !is_digit(b); },
      [](char32_t a, char32_t b) {
        return std::u32string{U' ', a, U' ', b};
      });
  spaced = pairs(
      spaced, [](char32_t a, char32_t b) { return is_digit(a) && b == U'-'; },
      [](char32_t a, char32_t b) {
        return std::u32string{a, U' ', b, U' '};
      });
  return split(spaced);
}

// A line as BLEU reads it: trailing whitespace removed, then tokenised.
std::vector<std::u32string> bleu_words(const std::string& line) {
  std::u32string s = code_points(line);
  while (!s.empty() && is_space(s.back())) s.pop_back();
  return words_13a(std::move(s));
}

// The BLEU statistics of one line against its references, added to `b`.
void add_line(Bleu& b, const std::string& hypothesis, const std::vector<const std::string*>& refs) {
  const std::vector<std::u32string> hyp = bleu_words(hypothesis);
  const auto hyp_len = static_cast<int64_t>(hyp.size());
  std::array<Counts, 4> most;  // of each n-gram, the most any one reference holds
  int64_t closest = -1;
  for (const std::string* ref : refs) {
    const std::vector<std::u32string> words = bleu_words(*ref);
    const auto len = static_cast<int64_t>(words.size());
    const int64_t diff = std::abs(hyp_len - len), best = std::abs(hyp_len - closest);
    if (closest < 0 || diff < best || (diff == best && len < closest)) closest = len;
    const auto counts = word_ngrams(words);
    for (size_t n = 0; n < 4; ++n) {
      for (const auto& [gram, count] : counts[n]) most[n][gram] = std::max(most[n][gram], count);
    }
  }
  const auto counts = word_ngrams(hyp);
  for (size_t n = 0; n < 4; ++n) {
    for (const auto& [gram, count] : counts[n]) {
      b.totals[n] += count;
      const auto it = most[n].find(gram);
      if (it != most[n].end()) b.matches[n] += std::min(count, it->second);
    }
  }
  b.hyp_len += hyp_len;
  b.ref_len += closest;
}

// Reference k of line i, for each stream, after checking the streams' lengths.
std::vector<const std::string*> refs_of(const References& references, size_t i) {
  std::vector<const std::string*> refs;
  for (const auto& stream : references) refs.push_back(&stream[i]);
  return refs;
}

void check_streams(const char* metric, size_t lines, const References& references) {
  TG_CHECK(!references.empty(), "{}: no reference stream", metric);
  for (size_t k = 0; k < references.size(); ++k) {
    TG_CHECK(references[k].size() == lines,
             "{}: reference stream {} has {} lines for {} hypotheses", metric, k,
             references[k].size(), lines);
  }
}

// chrF's statistics of one line: for each order n = 1 .. 6, the hypothesis's n-grams, the
// reference's and their matches.
using CharStats = std::array<int64_t, 18>;

CharStats char_stats(const std::u32string& hyp, const std::u32string& ref) {
  CharStats s{};
  for (size_t n = 1; n <= 6; ++n) {
    Counts h, r;
    for (size_t i = 0; i + n <= hyp.size(); ++i) ++h[hyp.substr(i, n)];
    for (size_t i = 0; i + n <= ref.size(); ++i) ++r[ref.substr(i, n)];
    int64_t match = 0;
    for (const auto& [gram, count] : h) {
      const auto it = r.find(gram);
      if (it != r.end()) match += std::min(count, it->second);
    }
    // as sacreBLEU: hypothesis n-grams count only where the reference has some of that order
    s[3 * (n - 1)] =
        hyp.size() >= n && ref.size() >= n ? static_cast<int64_t>(hyp.size() - n + 1) : 0;
    s[3 * (n - 1) + 1] = ref.size() >= n ? static_cast<int64_t>(ref.size() - n + 1) : 0;
    s[3 * (n - 1) + 2] = match;
  }
  return s;
}

// F_beta of the precision and recall averaged over the orders that both sides have.
double chrf_of(const CharStats& s, double beta) {
  double precision = 0, recall = 0;
  int orders = 0;
  for (size_t n = 0; n < 6; ++n) {
    const int64_t hyp = s[3 * n], ref = s[3 * n + 1], match = s[3 * n + 2];
    if (hyp == 0 || ref == 0) continue;
    precision += static_cast<double>(match) / static_cast<double>(hyp);
    recall += static_cast<double>(match) / static_cast<double>(ref);
    ++orders;
  }
  if (orders == 0 || precision + recall == 0) return 0;
  precision /= orders;
  recall /= orders;
  const double b2 = beta * beta;
  return 100 * (1 + b2) * precision * recall / (b2 * precision + recall);
}

// A line for chrF: its code points without whitespace.
std::u32string squeezed(const std::string& line) {
  std::u32string out;
  for (const std::u32string& word : split(code_points(line))) out += word;
  return out;
}

}  // namespace

std::string tokenize_13a(std::string_view line) {
  std::u32string joined;
  for (const std::u32string& word : words_13a(code_points(line)))
    joined += (joined.empty() ? U"" : U" ") + word;
  return utf8(joined);
}

Bleu corpus_bleu(const std::vector<std::string>& hypotheses, const References& references) {
  check_streams("corpus_bleu", hypotheses.size(), references);
  Bleu b;
  for (size_t i = 0; i < hypotheses.size(); ++i) add_line(b, hypotheses[i], refs_of(references, i));
  b.brevity_penalty =
      b.hyp_len >= b.ref_len ? 1.0
      : b.hyp_len > 0
          ? std::exp(1 - static_cast<double>(b.ref_len) / static_cast<double>(b.hyp_len))
          : 0.0;
  if (std::all_of(b.matches.begin(), b.matches.end(), [](int64_t m) { return m == 0; })) return b;
  // sacreBLEU's "exp" smoothing: the k-th order with no match counts as 1 / 2^k of a match
  double smooth = 1, log_sum = 0;
  for (size_t n = 0; n < 4; ++n) {
    if (b.totals[n] == 0) break;
    if (b.matches[n] == 0) {
      smooth *= 2;
      b.precisions[n] = 100 / (smooth * static_cast<double>(b.totals[n]));
    } else {
      b.precisions[n] = 100 * static_cast<double>(b.matches[n]) / static_cast<double>(b.totals[n]);
    }
  }
  for (const double p : b.precisions) log_sum += p > 0 ? std::log(p) : -9999999999.0;
  b.score = b.brevity_penalty * std::exp(log_sum / 4);
  return b;
}

std::string Bleu::describe() const {
  return fmt::format("BLEU {:.2f} ({:.1f}/{:.1f}/{:.1f}/{:.1f}, BP {:.3f}, {}/{} tokens)", score,
                     precisions[0], precisions[1], precisions[2], precisions[3], brevity_penalty,
                     hyp_len, ref_len);
}

double corpus_chrf(const std::vector<std::string>& hypotheses, const References& references,
                   double beta) {
  check_streams("corpus_chrf", hypotheses.size(), references);
  TG_CHECK(beta > 0, "corpus_chrf: beta must be positive, got {}", beta);
  CharStats total{};
  for (size_t i = 0; i < hypotheses.size(); ++i) {
    const std::u32string hyp = squeezed(hypotheses[i]);
    CharStats best{};
    double best_f = -1;
    for (const std::string* ref : refs_of(references, i)) {
      const CharStats s = char_stats(hyp, squeezed(*ref));
      if (const double f = chrf_of(s, beta); f > best_f) {
        best_f = f;
        best = s;
      }
    }
    for (size_t k = 0; k < total.size(); ++k) total[k] += best[k];
  }
  return chrf_of(total, beta);
}

}  // namespace tapegrad::metrics
