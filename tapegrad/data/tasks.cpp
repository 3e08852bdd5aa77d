// The built-in tasks (copy, reverse, sort, dates): generated examples, deterministic for a
// seed, with held-out splits.
#include "tapegrad/data/tasks.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <unordered_set>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/random.h"

namespace tapegrad::data {

namespace {

constexpr std::array<const char*, 12> kMonths = {"January",   "February", "March",    "April",
                                                 "May",       "June",     "July",     "August",
                                                 "September", "October",  "November", "December"};
constexpr std::array<const char*, 7> kWeekdays = {"Monday", "Tuesday",  "Wednesday", "Thursday",
                                                  "Friday", "Saturday", "Sunday"};

bool leap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }
int days_in_month(int y, int m) {
  constexpr std::array<int, 12> kDays = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && leap(y) ? 29 : kDays[m - 1];
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string ordinal(int d) {
  const char* suffix = (d % 100 >= 11 && d % 100 <= 13) ? "th"
                       : d % 10 == 1                    ? "st"
                       : d % 10 == 2                    ? "nd"
                       : d % 10 == 3                    ? "rd"
                                                        : "th";
  return fmt::format("{}{}", d, suffix);
}

// One written form of the date, chosen by `form`.
std::string date_text(int y, int m, int d, uint64_t form) {
  const std::string month = kMonths[m - 1];
  const std::string mon = month.substr(0, 3);
  const std::string wd = kWeekdays[weekday(y, m, d)];
  switch (form) {
    case 0: return fmt::format("{} {} {}", d, month, y);      // 4 March 2025
    case 1: return fmt::format("{} {}, {}", mon, d, y);       // Mar 4, 2025
    case 2: return fmt::format("{:02d}/{:02d}/{}", d, m, y);  // 04/03/2025
    case 3: return fmt::format("{} the {} of {} {}", lower(wd), ordinal(d), lower(month), y);
    case 4: return fmt::format("{}, {} {} {}", wd, d, month, y);        // Tuesday, 4 March 2025
    case 5: return fmt::format("{} {}, {}", month, d, y);               // March 4, 2025
    case 6: return fmt::format("{:02d}.{:02d}.{}", d, m, y);            // 04.03.2025
    case 7: return fmt::format("{} {} {}", ordinal(d), lower(mon), y);  // 4th mar 2025
    case 8: return fmt::format("{}-{:02d}-{:02d}", y, m, d);            // already ISO
    default: return fmt::format("{} {} {}", d, mon, y);                 // 4 Mar 2025
  }
}
constexpr uint64_t kDateForms = 10;

Example draw(Task task, Generator& gen) {
  if (task == Task::Dates) {
    const int y = 1950 + static_cast<int>(gen.below(100));
    const int m = 1 + static_cast<int>(gen.below(12));
    const int d = 1 + static_cast<int>(gen.below(days_in_month(y, m)));
    return {date_text(y, m, d, gen.below(kDateForms)), iso_date(y, m, d)};
  }
  // sequences of 4..10 letters from a..j, space separated
  const auto n = 4 + static_cast<int64_t>(gen.below(7));
  std::vector<char> seq(n);
  for (char& c : seq) c = static_cast<char>('a' + gen.below(10));
  std::vector<char> out = seq;
  if (task == Task::Reverse) std::reverse(out.begin(), out.end());
  if (task == Task::Sort) std::sort(out.begin(), out.end());
  auto join = [](const std::vector<char>& v) {
    std::string s;
    for (char c : v) {
      if (!s.empty()) s += ' ';
      s += c;
    }
    return s;
  };
  return {join(seq), join(out)};
}

}  // namespace

std::optional<Task> task_from_name(const std::string& name) {
  for (Task t : {Task::Copy, Task::Reverse, Task::Sort, Task::Dates}) {
    if (name == task_name(t)) return t;
  }
  return std::nullopt;
}

const char* task_name(Task task) {
  switch (task) {
    case Task::Copy: return "copy";
    case Task::Reverse: return "reverse";
    case Task::Sort: return "sort";
    case Task::Dates: return "dates";
  }
  return "?";
}

// Days since 1970-01-01 by Howard Hinnant's days_from_civil; 1970-01-01 was a Thursday
// (3 with Monday = 0).
int weekday(int y, int m, int d) {
  y -= m <= 2;
  const int era = (y >= 0 ? y : y - 399) / 400;
  const int yoe = y - era * 400;
  const int doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  const long days = static_cast<long>(era) * 146097 + doe - 719468;
  return static_cast<int>(((days % 7) + 7 + 3) % 7);
}

std::string iso_date(int y, int m, int d) { return fmt::format("{:04d}-{:02d}-{:02d}", y, m, d); }

TaskSplit make_task(Task task, int64_t n_train, int64_t n_valid, uint64_t seed) {
  TG_CHECK(n_train > 0 && n_valid >= 0, "make_task: bad sizes {} and {}", n_train, n_valid);
  Generator gen(seed);
  TaskSplit split;
  std::unordered_set<std::string> seen;
  // Draw distinct sources: the first n_valid go to the held-out set.
  const int64_t total = n_train + n_valid;
  int64_t attempts = 0;
  while (static_cast<int64_t>(seen.size()) < total) {
    TG_CHECK(++attempts < 50 * total, "make_task: cannot draw {} distinct {} examples", total,
             task_name(task));
    Example e = draw(task, gen);
    if (!seen.insert(e.source).second) continue;
    (static_cast<int64_t>(split.valid.size()) < n_valid ? split.valid : split.train)
        .push_back(std::move(e));
  }
  return split;
}

}  // namespace tapegrad::data
