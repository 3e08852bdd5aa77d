// Classification scores from the confusion matrix.
#include "tapegrad/metrics/classification.h"

#include <fmt/format.h>

#include <algorithm>

#include "tapegrad/autograd/error.h"

namespace tapegrad::metrics {

namespace {

double ratio(int64_t num, int64_t den) {
  return den == 0 ? 0 : static_cast<double>(num) / static_cast<double>(den);
}

}  // namespace

Classification classification(const std::vector<int64_t>& expected,
                              const std::vector<int64_t>& predicted, int64_t classes) {
  TG_CHECK(expected.size() == predicted.size(),
           "classification: {} expected classes but {} predicted", expected.size(),
           predicted.size());
  TG_CHECK(!expected.empty(), "classification: no examples");
  TG_CHECK(classes > 0 && classes <= kMaxClasses, "classification: {} classes; 1 to {} are allowed",
           classes, kMaxClasses);
  Classification c;
  const auto K = static_cast<size_t>(classes);
  c.confusion.assign(K, std::vector<int64_t>(K, 0));
  int64_t right = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    for (const int64_t k : {expected[i], predicted[i]}) {
      TG_CHECK(k >= 0 && k < classes, "classification: class {} of example {} is not in 0..{}", k,
               i, classes - 1);
    }
    ++c.confusion[expected[i]][predicted[i]];
    right += expected[i] == predicted[i];
  }
  c.accuracy = ratio(right, static_cast<int64_t>(expected.size()));
  int64_t occurring = 0;
  for (size_t k = 0; k < K; ++k) {
    int64_t as_k = 0;  // predicted as k
    for (size_t e = 0; e < K; ++e) as_k += c.confusion[e][k];
    ClassScores s;
    for (size_t p = 0; p < K; ++p) s.support += c.confusion[k][p];
    const int64_t tp = c.confusion[k][k];
    s.precision = ratio(tp, as_k);
    s.recall = ratio(tp, s.support);
    s.f1 = s.precision + s.recall > 0 ? 2 * s.precision * s.recall / (s.precision + s.recall) : 0;
    c.classes.push_back(s);
    if (s.support == 0 && as_k == 0) continue;  // absent from both: not in the averages
    ++occurring;
    c.macro_precision += s.precision;
    c.macro_recall += s.recall;
    c.macro_f1 += s.f1;
  }
  c.macro_precision /= static_cast<double>(occurring);
  c.macro_recall /= static_cast<double>(occurring);
  c.macro_f1 /= static_cast<double>(occurring);
  return c;
}

std::string Classification::table(const std::vector<std::string>& names) const {
  TG_CHECK(names.size() == classes.size(), "Classification::table: {} names for {} classes",
           names.size(), classes.size());
  size_t width = 11;  // "macro avg"
  for (const std::string& n : names) width = std::max(width, std::min<size_t>(n.size(), 40) + 2);
  std::string out = fmt::format("{:<{}}{:>10}{:>10}{:>10}{:>10}\n", "", width, "precision",
                                "recall", "f1", "support");
  int64_t total = 0;
  for (size_t k = 0; k < classes.size(); ++k) {
    const ClassScores& s = classes[k];
    out += fmt::format("{:<{}}{:>10.4f}{:>10.4f}{:>10.4f}{:>10}\n", names[k].substr(0, 40), width,
                       s.precision, s.recall, s.f1, s.support);
    total += s.support;
  }
  out += fmt::format("{:<{}}{:>10.4f}{:>10.4f}{:>10.4f}{:>10}\n", "macro avg", width,
                     macro_precision, macro_recall, macro_f1, total);
  out += fmt::format("{:<{}}{:>30.4f}{:>10}\n\n", "accuracy", width, accuracy, total);
  if (std::ssize(classes) > kMaxPrintedConfusion) {
    return out + fmt::format("confusion matrix of {} classes not printed (more than {})\n",
                             classes.size(), kMaxPrintedConfusion);
  }
  out += "confusion (rows expected, columns predicted)\n" + std::string(width, ' ');
  for (const std::string& n : names) out += fmt::format("{:>8}", n.substr(0, 7));
  out += "\n";
  for (size_t e = 0; e < classes.size(); ++e) {
    out += fmt::format("{:<{}}", names[e].substr(0, 40), width);
    for (const int64_t n : confusion[e]) out += fmt::format("{:>8}", n);
    out += "\n";
  }
  return out;
}

}  // namespace tapegrad::metrics
