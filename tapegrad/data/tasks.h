// Built-in tasks, generated in-process from a seed, so training needs no download:
//   copy     "c a d b"                -> "c a d b"        (The Annotated Transformer, minGPT)
//   reverse  "c a d b"                -> "b d a c"
//   sort     "c a d b"                -> "a b c d"
//   dates    "tuesday the 4th of march 2025", "04/03/2025", "Mar 4, 2025", ... -> "2025-03-04"
// Dates follow one convention: numeric forms are day first (04/03/2025 is 4 March), and a
// written weekday always agrees with its date, so every input has exactly one right answer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tapegrad/data/corpus.h"

namespace tapegrad::data {

enum class Task { Copy, Reverse, Sort, Dates };

std::optional<Task> task_from_name(const std::string& name);  // "copy", "reverse", ...
const char* task_name(Task task);

struct TaskSplit {
  std::vector<Example> train;
  std::vector<Example> valid;  // held out: no source of it appears in train
};

// n_train + n_valid distinct examples drawn from `seed`.
TaskSplit make_task(Task task, int64_t n_train, int64_t n_valid, uint64_t seed);

// The date task's pieces, exposed for tests: the weekday of a date (0 = Monday) and the
// ISO 8601 form.
int weekday(int year, int month, int day);
std::string iso_date(int year, int month, int day);

}  // namespace tapegrad::data
