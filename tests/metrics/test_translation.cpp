// BLEU and chrF against sacreBLEU: values it publishes for its default settings (its README's
// example, its test suite, Hugging Face's metric card of it), worked examples by hand, and the
// 13a tokeniser rule by rule.
#include <catch2/catch.hpp>

#include "tapegrad/autograd/error.h"
#include "tapegrad/metrics/translation.h"

using namespace tapegrad;
using metrics::corpus_bleu;
using metrics::corpus_chrf;

TEST_CASE("13a splits off symbols, and periods and commas not between digits", "[metrics]") {
  CHECK(metrics::tokenize_13a("Hello, world.") == "Hello , world .");
  CHECK(metrics::tokenize_13a("It cost $3.50.") == "It cost $ 3.50 .");
  CHECK(metrics::tokenize_13a("1,000 or 1990-2000") == "1,000 or 1990 - 2000");
  CHECK(metrics::tokenize_13a("don't a/b (c)") == "don't a / b ( c )");
  CHECK(metrics::tokenize_13a("&quot;x&quot; &amp; y") == "\" x \" & y");
  CHECK(metrics::tokenize_13a("  many \t  spaces  ") == "many spaces");
  CHECK(metrics::tokenize_13a("e.g. x") == "e . g . x");
  CHECK(metrics::tokenize_13a("a\u00a0b") == "a b");  // a no-break space is whitespace
  CHECK(metrics::tokenize_13a("") == "");
}

TEST_CASE("corpus BLEU equals sacreBLEU's on its README example, two references", "[metrics]") {
  const std::vector<std::string> hyps = {"The dog bit the man.", "It wasn't surprising.",
                                         "The man had just bitten him."};
  const metrics::References refs = {
      {"The dog bit the man.", "It was not unexpected.", "The man bit him first."},
      {"The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."}};
  const metrics::Bleu b = corpus_bleu(hyps, refs);
  CHECK(b.score == Approx(48.530827).margin(1e-6));
  CHECK(corpus_bleu({"", "", ""}, refs).score == 0);  // empty hypotheses count, and score 0
}

TEST_CASE("corpus BLEU by hand: clipped precisions, exp smoothing, the brevity penalty",
          "[metrics]") {
  // 3/4 unigrams, 2/3 bigrams, 1/2 trigrams, 0/1 four-grams: smoothed to 1 / (2 * 1)
  const metrics::Bleu fest = corpus_bleu({"this is a fest"}, {{"this is a test"}});
  CHECK(fest.precisions[0] == Approx(75));
  CHECK(fest.precisions[3] == Approx(50));
  CHECK(fest.score == Approx(std::pow(75.0 * (200.0 / 3) * 50 * 50, 0.25)));
  // every n-gram right, but 4 tokens for 6: BP = exp(1 - 6/4)
  const metrics::Bleu short_ = corpus_bleu({"a b c d"}, {{"a b c d e f"}});
  CHECK(short_.brevity_penalty == Approx(std::exp(-0.5)));
  CHECK(short_.score == Approx(100 * std::exp(-0.5)));
  // a repeated word is clipped to the count the reference holds
  const metrics::Bleu repeated = corpus_bleu({"the the the the"}, {{"the cat"}});
  CHECK(repeated.matches[0] == 1);
  CHECK(repeated.totals[0] == 4);
  CHECK(corpus_bleu({"this is a test"}, {{"this is a test"}}).score == Approx(100));
  CHECK(corpus_bleu({"this is a test", "another test"}, {{"ref1", "ref2"}}).score == 0);
  // the reference closest in length counts for the brevity penalty
  CHECK(corpus_bleu({"a b c d"}, {{"a b c d e f"}, {"a b c d e"}}).ref_len == 5);
}

TEST_CASE("corpus chrF equals sacreBLEU's published values", "[metrics]") {
  // Hugging Face's metric card of sacreBLEU's chrF (defaults: 6-grams, beta 2)
  CHECK(corpus_chrf({"The relationship between Obama and Netanyahu is not exactly friendly."},
                    {{"The ties between Obama and Netanyahu are not particularly friendly."}}) ==
        Approx(61.576379378113785).margin(1e-9));
  CHECK(corpus_chrf({"The relationship between cats and dogs is not exactly friendly.",
                     "a good bookshop is just a genteel black hole that knows how to read."},
                    {{"The relationship between dogs and cats is not exactly friendly.",
                      "A good bookshop is just a genteel Black Hole that knows how to read."}}) ==
        Approx(84.64214891738334).margin(1e-9));
  // sacreBLEU's tests of its default (effective-order) averaging, with beta 3
  CHECK(corpus_chrf({"a"}, {{"a"}}, 3) == Approx(100));
  CHECK(corpus_chrf({""}, {{"reference"}}, 3) == 0);
  CHECK(corpus_chrf({"a b c"}, {{"abc"}}, 3) == Approx(100));  // whitespace does not count
  CHECK(corpus_chrf({"a", "b"}, {{"a", "c"}}, 3) == Approx(50));
  CHECK(corpus_chrf({"aa"}, {{"ab"}}, 3) == Approx(25));
}

TEST_CASE("chrF counts a line's n-grams of an order only where its reference has some",
          "[metrics]") {
  // line 1: 1-grams 3 against 1 (1 match), and no reference 2-gram, so its hypothesis 2- to
  // 6-grams do not count; line 2: all right. P = (8/10 + 5) / 6 = 29/30, R = 1:
  // F = 5 P R / (4 P + R) = 145/146
  CHECK(corpus_chrf({"abc", "abcdefg"}, {{"a", "abcdefg"}}) ==
        Approx(100.0 * 145 / 146).margin(1e-9));
}

TEST_CASE("chrF counts characters, not bytes", "[metrics]") {
  // one of two characters right, no bigram: P = R = 1/2 over one order of two
  CHECK(corpus_chrf({"\u00e4b"}, {{"\u00e4c"}}) == Approx(25));
  CHECK(corpus_chrf({"\u00e4\u00f6\u00fc"}, {{"\u00e4\u00f6\u00fc"}}) == Approx(100));
}

TEST_CASE("the metrics refuse reference streams of another length", "[metrics][errors]") {
  CHECK_THROWS_WITH(corpus_bleu({"a", "b"}, {{"a"}}),
                    "corpus_bleu: reference stream 0 has 1 lines for 2 hypotheses");
  CHECK_THROWS_WITH(corpus_chrf({"a"}, {}), "corpus_chrf: no reference stream");
}
