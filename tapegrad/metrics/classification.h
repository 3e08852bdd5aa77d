// How well predicted classes match the expected ones, as scikit-learn's classification_report
// and confusion_matrix count them: accuracy; for each class its precision (of the examples
// predicted as it, the fraction that are), recall (of the examples that are it, the fraction
// predicted as it), F1 (their harmonic mean; 0 where both are 0, or where a ratio has nothing to
// count: sklearn's zero_division=0) and support; the macro averages over the classes that occur
// among the expected or predicted ones; and the confusion matrix.
//
//   const metrics::Classification c = metrics::classification({0, 1, 2}, {0, 2, 2}, 3);
//   fmt::print("{}", c.table({"neg", "pos", "mixed"}));
//
// A tagger's tokens are scored the same way, each token an example.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tapegrad::metrics {

// The most classes a classification holds (its confusion matrix has this many squared), and
// the most whose confusion matrix table() prints as text (a wider one does not read as a table).
constexpr int64_t kMaxClasses = 4096;
constexpr int64_t kMaxPrintedConfusion = 32;

struct ClassScores {
  double precision = 0, recall = 0, f1 = 0;
  int64_t support = 0;  // examples whose expected class it is
};

struct Classification {
  double accuracy = 0;
  double macro_precision = 0, macro_recall = 0, macro_f1 = 0;
  std::vector<ClassScores> classes;
  // confusion[e][p]: the examples of expected class e predicted as p
  std::vector<std::vector<int64_t>> confusion;
  // The per-class scores, the macro averages and the confusion matrix (of at most
  // kMaxPrintedConfusion classes; a line saying so for more) as aligned text, the classes named
  // by `names` (one per class).
  std::string table(const std::vector<std::string>& names) const;
};

// Throws Error when the two differ in length, are empty, hold a class outside 0..classes-1, or
// `classes` is over kMaxClasses.
Classification classification(const std::vector<int64_t>& expected,
                              const std::vector<int64_t>& predicted, int64_t classes);

}  // namespace tapegrad::metrics
