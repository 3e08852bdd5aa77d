// A profiler by op: while a ProfileGuard lives on a thread, every op that thread runs is timed,
// forward and backward apart, with its call count, the bytes of the tensors it allocated and,
// for matrix products, the flops it did; table() prints them sorted by time, with each
// product's achieved rate. Off, it costs one thread-local check per op, as DetectAnomalyGuard.
//
//   ProfileGuard profile;
//   train_step();
//   fmt::print("{}", profile.table());
//
// The same figures by module path (by_module(), module_table()): an op is charged to the
// innermost module call running when the op ran (nn::call opens a profile::ModuleScope around
// a module's forward), and its backward to the module that recorded it; ops outside any module
// go to "(no module)".
//
// Times are self times: an op that calls other ops (linear calls no other op, a composite in
// nn may) is charged only for what its callees did not take, so the column adds up to the
// time the ops took. A backward step is charged to the op that recorded it ("matmul
// backward"), whatever it calls. Times are wall time on the calling thread, which includes
// the kernels' worker threads working for it.
//
// The parallel loops an op runs (parallel_for split between threads) are counted and timed
// too: the rest of its time the calling thread ran alone, the other threads idle (setting up,
// allocating, recording, or a loop too small to split). With one thread, or in the learner's
// edition, nothing is split and every op runs alone.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tapegrad {

class ProfileGuard {
 public:
  struct Row {
    std::string op;
    int64_t forward_calls = 0, backward_calls = 0;
    double forward_seconds = 0, backward_seconds = 0;
    int64_t bytes = 0;        // of the tensors it allocated, forward and backward
    double flops = 0;         // matrix products: 2 M N K each, forward and backward
    int64_t loops = 0;        // parallel loops, forward and backward
    double loop_seconds = 0;  // the calling thread's wall time in them, within the times above
  };

  ProfileGuard();
  ~ProfileGuard();
  ProfileGuard(const ProfileGuard&) = delete;
  ProfileGuard& operator=(const ProfileGuard&) = delete;

  // One row an op, by forward + backward time, longest first.
  std::vector<Row> rows() const;
  // The rows as a table, times divided by `per` (the steps profiled: per-step figures), with
  // each op's share of the total, where it did flops its GFLOP/s, its parallel loops and its
  // time alone (outside them).
  std::string table(int64_t per = 1) const;
  // The same by module path: Row::op holds the path, the calls count the ops run in it.
  std::vector<Row> by_module() const;
  std::string module_table(int64_t per = 1) const;

  // What ops, modules and the thread pool call (through profile::Scope, ModuleScope,
  // note_bytes, note_flops, note_loop); not for users.
  struct Frame;
  void enter(const char* op, bool backward, const std::string* module = nullptr);
  void leave();
  void add_bytes(int64_t bytes);
  void add_flops(double flops);
  void add_loop(double seconds);
  void enter_module(const std::string* path) { modules_.push_back(path); }
  void leave_module() { modules_.pop_back(); }
  // The innermost module's name in the table ("(root)" for the root module), empty outside any:
  // what a tape entry keeps for its backward.
  std::string module() const;

 private:
  Row& module_row(const Frame& f);
  ProfileGuard* previous_;
  std::map<std::string, Row> rows_, module_rows_;
  std::vector<Frame> stack_;
  std::vector<const std::string*> modules_;
};

// The profiler's hooks that ops and modules call: the current guard and the scopes.
namespace profile {
// The guard on this thread, or nullptr: what every check reads.
inline thread_local ProfileGuard* t_current = nullptr;

// An op's timed region: placed at the top of an op's function (forward) and around a tape
// entry's backward. Does nothing when no guard is on.
class Scope {
 public:
  // module: for a backward, the path its entry kept; a forward takes the innermost ModuleScope's
  explicit Scope(const char* op, bool backward = false, const std::string* module = nullptr)
      : on_(t_current != nullptr) {
    if (on_) [[unlikely]]
      t_current->enter(op, backward, module);
  }
  ~Scope() {
    if (on_) [[unlikely]]
      t_current->leave();
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  bool on_;
};

// A module's forward, at its top (nn::Module::profiled()): the ops inside are charged to
// `path` (which must outlive the scope). Does nothing when no guard is on.
class ModuleScope {
 public:
  explicit ModuleScope(const std::string& path) : on_(t_current != nullptr) {
    if (on_) [[unlikely]]
      t_current->enter_module(&path);
  }
  ~ModuleScope() {
    if (on_) [[unlikely]]
      t_current->leave_module();
  }
  ModuleScope(const ModuleScope&) = delete;
  ModuleScope& operator=(const ModuleScope&) = delete;

 private:
  bool on_;
};

inline void note_bytes(int64_t bytes) {
  if (t_current) [[unlikely]]
    t_current->add_bytes(bytes);
}
inline void note_flops(double flops) {
  if (t_current) [[unlikely]]
    t_current->add_flops(flops);
}
// A parallel loop the calling thread ran, start to join.
inline void note_loop(double seconds) {
  if (t_current) [[unlikely]]
    t_current->add_loop(seconds);
}
}  // namespace profile

}  // namespace tapegrad
