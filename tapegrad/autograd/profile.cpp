// ProfileGuard: a stack of timed frames, self times and bytes charged to the innermost op.
#include "tapegrad/autograd/profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

namespace tapegrad {

struct ProfileGuard::Frame {
  const char* op;
  bool backward;
  std::chrono::steady_clock::time_point start;
  double children = 0;  // seconds taken by the ops it called
};

ProfileGuard::ProfileGuard() : previous_(profile::t_current) { profile::t_current = this; }
ProfileGuard::~ProfileGuard() { profile::t_current = previous_; }

void ProfileGuard::enter(const char* op, bool backward) {
  // within a backward step, what it calls is its own time
  if (!stack_.empty() && stack_.back().backward) {
    stack_.push_back({stack_.back().op, true, std::chrono::steady_clock::time_point::min()});
    return;
  }
  stack_.push_back({op, backward, std::chrono::steady_clock::now(), 0});
}

void ProfileGuard::leave() {
  const Frame f = stack_.back();
  stack_.pop_back();
  if (f.start == std::chrono::steady_clock::time_point::min()) return;  // folded into a backward
  const double total =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - f.start).count();
  Row& row = rows_[f.op];
  row.op = f.op;
  if (f.backward) {
    ++row.backward_calls;
    row.backward_seconds += total - f.children;
  } else {
    ++row.forward_calls;
    row.forward_seconds += total - f.children;
  }
  if (!stack_.empty()) stack_.back().children += total;
}

void ProfileGuard::add_bytes(int64_t bytes) {
  if (!stack_.empty()) rows_[stack_.back().op].bytes += bytes;
}

void ProfileGuard::add_flops(double flops) {
  if (!stack_.empty()) rows_[stack_.back().op].flops += flops;
}

std::vector<ProfileGuard::Row> ProfileGuard::rows() const {
  std::vector<Row> out;
  for (const auto& [op, row] : rows_) {
    if (row.forward_calls + row.backward_calls > 0) out.push_back(row);
  }
  std::stable_sort(out.begin(), out.end(), [](const Row& a, const Row& b) {
    return a.forward_seconds + a.backward_seconds > b.forward_seconds + b.backward_seconds;
  });
  return out;
}

std::string ProfileGuard::table(int64_t per) const {
  const auto rows = this->rows();
  const double n = static_cast<double>(std::max<int64_t>(per, 1));
  double total = 0;
  for (const Row& r : rows) total += r.forward_seconds + r.backward_seconds;
  std::string out =
      fmt::format("{:<18} {:>9} {:>10} {:>9} {:>10} {:>6} {:>10} {:>8}\n", "op", "fwd calls",
                  "fwd ms", "bwd calls", "bwd ms", "share", "MB alloc", "GFLOP/s");
  for (const Row& r : rows) {
    const double seconds = r.forward_seconds + r.backward_seconds;
    out +=
        fmt::format("{:<18} {:>9.0f} {:>10.3f} {:>9.0f} {:>10.3f} {:>5.1f}% {:>10.1f} {:>8}\n",
                    r.op, static_cast<double>(r.forward_calls) / n, 1e3 * r.forward_seconds / n,
                    static_cast<double>(r.backward_calls) / n, 1e3 * r.backward_seconds / n,
                    total > 0 ? 100 * seconds / total : 0.0, static_cast<double>(r.bytes) / n / 1e6,
                    r.flops > 0 && seconds > 0 ? fmt::format("{:.1f}", r.flops / seconds / 1e9)
                                               : std::string("-"));
  }
  out += fmt::format("{:<18} {:>9} {:>10.3f} (all ops, per step)\n", "total", "", 1e3 * total / n);
  return out;
}

}  // namespace tapegrad
