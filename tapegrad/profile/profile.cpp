// ProfileGuard: a stack of timed frames, self times, bytes, flops and parallel loops charged to
// the innermost op.
#include "tapegrad/profile/profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

namespace tapegrad {

struct ProfileGuard::Frame {
  const char* op;
  bool backward;
  std::chrono::steady_clock::time_point start;
  double children = 0;        // seconds taken by the ops it called
  const std::string* module;  // charged to this path; null: no module
};

namespace {
const std::string kNoModule = "(no module)", kRoot = "(root)";
}

ProfileGuard::ProfileGuard() : previous_(profile::t_current) { profile::t_current = this; }
ProfileGuard::~ProfileGuard() { profile::t_current = previous_; }

void ProfileGuard::enter(const char* op, bool backward, const std::string* module) {
  // within a backward step, what it calls is its own time
  if (!stack_.empty() && stack_.back().backward) {
    const Frame& outer = stack_.back();
    stack_.push_back(
        {outer.op, true, std::chrono::steady_clock::time_point::min(), 0, outer.module});
    return;
  }
  if (!backward) module = modules_.empty() ? nullptr : modules_.back();
  stack_.push_back({op, backward, std::chrono::steady_clock::now(), 0, module});
}

// A forward frame holds a module's path ("" for the root module), a backward frame the name its
// entry kept (module(): "" when none).
ProfileGuard::Row& ProfileGuard::module_row(const Frame& f) {
  const std::string* name = &kNoModule;
  if (f.module != nullptr && !f.module->empty()) {
    name = f.module;
  } else if (f.module != nullptr && !f.backward) {
    name = &kRoot;
  }
  Row& row = module_rows_[*name];
  row.op = *name;
  return row;
}

std::string ProfileGuard::module() const {
  if (modules_.empty()) return {};
  return modules_.back()->empty() ? kRoot : *modules_.back();
}

void ProfileGuard::leave() {
  const Frame f = stack_.back();
  stack_.pop_back();
  if (f.start == std::chrono::steady_clock::time_point::min()) return;  // folded into a backward
  const double total =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - f.start).count();
  Row& row = rows_[f.op];
  row.op = f.op;
  for (Row* r : {&row, &module_row(f)}) {
    if (f.backward) {
      ++r->backward_calls;
      r->backward_seconds += total - f.children;
    } else {
      ++r->forward_calls;
      r->forward_seconds += total - f.children;
    }
  }
  if (!stack_.empty()) stack_.back().children += total;
}

void ProfileGuard::add_bytes(int64_t bytes) {
  if (stack_.empty()) return;
  rows_[stack_.back().op].bytes += bytes;
  module_row(stack_.back()).bytes += bytes;
}

void ProfileGuard::add_flops(double flops) {
  if (stack_.empty()) return;
  rows_[stack_.back().op].flops += flops;
  module_row(stack_.back()).flops += flops;
}

void ProfileGuard::add_loop(double seconds) {
  if (stack_.empty()) return;
  for (Row* r : {&rows_[stack_.back().op], &module_row(stack_.back())}) {
    ++r->loops;
    r->loop_seconds += seconds;
  }
}

namespace {
// The rows that ran, by forward + backward time, longest first.
std::vector<ProfileGuard::Row> sorted(const std::map<std::string, ProfileGuard::Row>& rows) {
  std::vector<ProfileGuard::Row> out;
  for (const auto& [op, row] : rows) {
    if (row.forward_calls + row.backward_calls > 0) out.push_back(row);
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.forward_seconds + a.backward_seconds > b.forward_seconds + b.backward_seconds;
  });
  return out;
}

// The rows as a table whose first column, `what` wide, is headed `what`.
std::string format_table(const std::vector<ProfileGuard::Row>& rows, const char* what, int width,
                         int64_t per) {
  using Row = ProfileGuard::Row;
  const double n = static_cast<double>(std::max<int64_t>(per, 1));
  double total = 0, in_loops = 0;
  int64_t loops = 0;
  for (const Row& r : rows) {
    total += r.forward_seconds + r.backward_seconds;
    in_loops += r.loop_seconds;
    loops += r.loops;
  }
  std::string out = fmt::format("{:<{}} {:>9} {:>10} {:>9} {:>10} {:>6} {:>10} {:>8} {:>6} {:>9}\n",
                                what, width, "fwd calls", "fwd ms", "bwd calls", "bwd ms", "share",
                                "MB alloc", "GFLOP/s", "loops", "alone ms");
  for (const Row& r : rows) {
    const double seconds = r.forward_seconds + r.backward_seconds;
    out += fmt::format(
        "{:<{}} {:>9.0f} {:>10.3f} {:>9.0f} {:>10.3f} {:>5.1f}% {:>10.1f} {:>8} {:>6.0f} "
        "{:>9.3f}\n",
        r.op, width, static_cast<double>(r.forward_calls) / n, 1e3 * r.forward_seconds / n,
        static_cast<double>(r.backward_calls) / n, 1e3 * r.backward_seconds / n,
        total > 0 ? 100 * seconds / total : 0.0, static_cast<double>(r.bytes) / n / 1e6,
        r.flops > 0 && seconds > 0 ? fmt::format("{:.1f}", r.flops / seconds / 1e9)
                                   : std::string("-"),
        static_cast<double>(r.loops) / n, 1e3 * std::max(0.0, seconds - r.loop_seconds) / n);
  }
  out += fmt::format(
      "{:<{}} {:>9} {:>10.3f} (all ops, per step): {:.3f} in {:.0f} parallel loops, {:.3f} alone\n",
      "total", width, "", 1e3 * total / n, 1e3 * in_loops / n, static_cast<double>(loops) / n,
      1e3 * std::max(0.0, total - in_loops) / n);
  return out;
}
}  // namespace

std::vector<ProfileGuard::Row> ProfileGuard::rows() const { return sorted(rows_); }
std::vector<ProfileGuard::Row> ProfileGuard::by_module() const { return sorted(module_rows_); }

std::string ProfileGuard::table(int64_t per) const { return format_table(rows(), "op", 18, per); }

std::string ProfileGuard::module_table(int64_t per) const {
  const auto rows = by_module();
  size_t width = 18;
  for (const Row& r : rows) width = std::max(width, r.op.size());
  return format_table(rows, "module", static_cast<int>(width), per);
}

}  // namespace tapegrad
