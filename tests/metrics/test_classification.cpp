// Classification scores against scikit-learn's documented examples (f1_score,
// classification_report, confusion_matrix) and hand-counted cases.
#include <catch2/catch.hpp>

#include "tapegrad/autograd/error.h"
#include "tapegrad/metrics/classification.h"

using namespace tapegrad;
using Catch::Matchers::WithinAbs;

TEST_CASE("per-class and macro F1 as sklearn's f1_score example gives them") {
  // f1_score([0, 1, 2, 0, 1, 2], [0, 2, 1, 0, 0, 1], average=None) == [0.8, 0, 0]; macro 0.26...
  const auto c = metrics::classification({0, 1, 2, 0, 1, 2}, {0, 2, 1, 0, 0, 1}, 3);
  CHECK_THAT(c.classes[0].f1, WithinAbs(0.8, 1e-12));
  CHECK(c.classes[1].f1 == 0);
  CHECK(c.classes[2].f1 == 0);
  CHECK_THAT(c.macro_f1, WithinAbs(0.8 / 3, 1e-12));
  CHECK_THAT(c.accuracy, WithinAbs(2.0 / 6, 1e-12));
}

TEST_CASE("sklearn's classification_report example") {
  // y_true [0, 1, 2, 2, 2], y_pred [0, 0, 2, 2, 1]: class 0 0.50/1.00/0.67, class 1 0/0/0,
  // class 2 1.00/0.67/0.80, accuracy 0.60, macro 0.50/0.56/0.49
  const auto c = metrics::classification({0, 1, 2, 2, 2}, {0, 0, 2, 2, 1}, 3);
  CHECK_THAT(c.classes[0].precision, WithinAbs(0.5, 1e-12));
  CHECK_THAT(c.classes[0].recall, WithinAbs(1.0, 1e-12));
  CHECK_THAT(c.classes[0].f1, WithinAbs(2.0 / 3, 1e-12));
  CHECK(c.classes[1].precision == 0);
  CHECK_THAT(c.classes[2].recall, WithinAbs(2.0 / 3, 1e-12));
  CHECK_THAT(c.classes[2].f1, WithinAbs(0.8, 1e-12));
  CHECK(c.classes[2].support == 3);
  CHECK_THAT(c.accuracy, WithinAbs(0.6, 1e-12));
  CHECK_THAT(c.macro_precision, WithinAbs(0.5, 1e-12));
  CHECK_THAT(c.macro_recall, WithinAbs(5.0 / 9, 1e-12));
  CHECK_THAT(c.macro_f1, WithinAbs((2.0 / 3 + 0.8) / 3, 1e-12));
  const std::string table = c.table({"neg", "pos", "mixed"});
  CHECK_THAT(table, Catch::Contains("mixed"));
  CHECK_THAT(table, Catch::Contains("macro avg"));
  CHECK_THAT(table, Catch::Contains("0.6000"));
}

TEST_CASE("the confusion matrix as sklearn's confusion_matrix example counts it") {
  // y_true [2, 0, 2, 2, 0, 1], y_pred [0, 0, 2, 2, 0, 2] -> [[2, 0, 0], [0, 0, 1], [1, 0, 2]]
  const auto c = metrics::classification({2, 0, 2, 2, 0, 1}, {0, 0, 2, 2, 0, 2}, 3);
  CHECK(c.confusion == std::vector<std::vector<int64_t>>{{2, 0, 0}, {0, 0, 1}, {1, 0, 2}});
}

TEST_CASE("a class absent from both sides is left out of the macro averages") {
  // four classes, class 3 never expected nor predicted: macro over 0..2 (sklearn's labels
  // default, the union of both sides)
  const auto c = metrics::classification({0, 1, 2, 0, 1, 2}, {0, 2, 1, 0, 0, 1}, 4);
  CHECK_THAT(c.macro_f1, WithinAbs(0.8 / 3, 1e-12));
  CHECK(c.classes[3].support == 0);
  // all right: every score 1
  const auto all = metrics::classification({1, 0, 1}, {1, 0, 1}, 2);
  CHECK(all.macro_f1 == 1);
  CHECK(all.accuracy == 1);
}

TEST_CASE("classification refuses what it cannot score") {
  CHECK_THROWS_WITH(metrics::classification({0, 1}, {0}, 2),
                    "classification: 2 expected classes but 1 predicted");
  CHECK_THROWS_WITH(metrics::classification({}, {}, 2), "classification: no examples");
  CHECK_THROWS_WITH(metrics::classification({0, 2}, {0, 1}, 2),
                    "classification: class 2 of example 1 is not in 0..1");
  CHECK_THROWS_WITH(metrics::classification({0}, {0}, 1).table({"a", "b"}),
                    "Classification::table: 2 names for 1 classes");
}

TEST_CASE("classification is bounded in its classes, and its table in what it prints") {
  CHECK_THROWS_WITH(metrics::classification({0}, {0}, metrics::kMaxClasses + 1),
                    "classification: 4097 classes; 1 to 4096 are allowed");
  std::vector<int64_t> labels;
  std::vector<std::string> names;
  for (int64_t k = 0; k <= metrics::kMaxPrintedConfusion; ++k) {
    labels.push_back(k);
    names.push_back("c" + std::to_string(k));
  }
  const std::string wide = metrics::classification(labels, labels, std::ssize(labels)).table(names);
  CHECK(wide.find("confusion matrix of 33 classes not printed (more than 32)") !=
        std::string::npos);
  CHECK(wide.find("confusion (rows expected") == std::string::npos);
  labels.pop_back();
  names.pop_back();
  const std::string narrow =
      metrics::classification(labels, labels, std::ssize(labels)).table(names);
  CHECK(narrow.find("confusion (rows expected, columns predicted)") != std::string::npos);
}
