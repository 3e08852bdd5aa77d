// The thread pool behind parallel_for: workers that spin, yield, then sleep between loops,
// chunked ranges taken by whichever thread is ready, exceptions carried back to the caller,
// a refused thread as an Error, and each loop timed for the profiler when one is on.
#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/threads.h"
#include "tapegrad/profile/profile.h"

namespace tapegrad {

namespace {

// True on a thread while it runs a chunk: a nested parallel_for then runs serially.
thread_local bool t_in_chunk = false;

// Chunk i of n items split c ways: [n i / c, n (i + 1) / c).
int64_t chunk_begin(int64_t n, int chunks, int i) { return n * i / chunks; }

// threads - 1 workers; the thread that calls run() takes chunks with them.
class Pool {
 public:
  // A thread the system refuses (a memory or process limit) is a tapegrad Error, after the
  // workers already started are stopped: a std::thread left joinable would terminate.
  explicit Pool(int threads) {
    for (int i = 1; i < threads; ++i) {
      try {
        workers_.emplace_back([this] { work(); });
      } catch (const std::system_error& e) {
        stop();
        throw Error(fmt::format("set_num_threads: cannot start thread {} of {}: {}", i + 1, threads,
                                e.what()));
      }
    }
  }

  ~Pool() { stop(); }

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  void run(int64_t n, int chunks, detail::ChunkFn fn, void* ctx) {
    std::unique_lock lock(busy_, std::try_to_lock);
    if (!lock.owns_lock()) {  // another thread of the program is using the pool
      run_serially(n, chunks, fn, ctx);
      return;
    }
    n_ = n;
    chunks_ = chunks;
    fn_ = fn;
    ctx_ = ctx;
    error_ = nullptr;
    done_.store(0, std::memory_order_relaxed);
    const uint32_t generation = generation_.load(std::memory_order_relaxed) + 1;
    claims_.store(Claim{generation, chunks, 0}.word(), std::memory_order_release);
    generation_.store(generation, std::memory_order_release);
    generation_.notify_all();
    run_claimed(generation);
    wait_while([&] { return done_.load(std::memory_order_acquire) != chunks; },
               [] { std::this_thread::yield(); });
    if (error_) std::rethrow_exception(error_);
  }

 private:
  static void run_serially(int64_t n, int chunks, detail::ChunkFn fn, void* ctx) {
    const bool outer = t_in_chunk;
    t_in_chunk = true;
    try {
      for (int i = 0; i < chunks; ++i) {
        fn(ctx, chunk_begin(n, chunks, i), chunk_begin(n, chunks, i + 1));
      }
    } catch (...) {
      t_in_chunk = outer;
      throw;
    }
    t_in_chunk = outer;
  }

  // The claim word: the loop's generation, its chunk count and the next unclaimed chunk, in
  // one atomic so a thread that wakes late for a loop finished since cannot take a chunk of
  // the next one.
  struct Claim {
    uint32_t generation;
    int chunks;
    int next;
    uint64_t word() const {
      return uint64_t{generation} << 32 | uint64_t(chunks) << 16 | uint64_t(next);
    }
    static Claim of(uint64_t w) {
      return {static_cast<uint32_t>(w >> 32), static_cast<int>(w >> 16 & 0xffff),
              static_cast<int>(w & 0xffff)};
    }
  };

  // Takes and runs chunks of loop `generation` until none is left: whichever thread is
  // ready first takes the next chunk, so a worker slow to wake (a busy or descheduled core)
  // leaves its chunk to the caller instead of holding the loop up. Which thread runs a chunk
  // changes nothing in its result.
  void run_claimed(uint32_t generation) {
    uint64_t word = claims_.load(std::memory_order_acquire);
    while (true) {
      const Claim c = Claim::of(word);
      if (c.generation != generation || c.next >= c.chunks) return;
      if (!claims_.compare_exchange_weak(word, Claim{c.generation, c.chunks, c.next + 1}.word(),
                                         std::memory_order_acquire)) {
        continue;
      }
      t_in_chunk = true;
      try {
        fn_(ctx_, chunk_begin(n_, c.chunks, c.next), chunk_begin(n_, c.chunks, c.next + 1));
      } catch (...) {
        std::lock_guard guard(error_mutex_);
        if (!error_) error_ = std::current_exception();
      }
      t_in_chunk = false;
      done_.fetch_add(1, std::memory_order_release);
      word = claims_.load(std::memory_order_acquire);
    }
  }

  // Waits for the next loop: spins on the generation counter for kSpin, then keeps checking
  // but yields the core between checks, and after kYield sleeps on the counter: a training
  // step's loops mostly come within 100 us of each other, so a shorter spin sleeps between
  // them, and a spin that never yields starves other processes' threads on a small machine.
  // The spin is plain loads, without the x86 `pause` hint: under KVM a vCPU that pauses in a
  // loop is descheduled (pause-loop exiting), and waking it takes tens of microseconds.
  void work() {
    uint32_t seen = 0;
    while (true) {
      wait_while([&] { return generation_.load(std::memory_order_acquire) == seen; },
                 [&] { generation_.wait(seen, std::memory_order_acquire); });
      seen = generation_.load(std::memory_order_acquire);
      if (stop_.load()) return;
      run_claimed(seen);
    }
  }

  // Spin-then-yield-then-sleep while pending(); the main thread, which nobody wakes, passes
  // a yield as its sleep.
  template <class Pending, class Sleep>
  static void wait_while(Pending pending, Sleep sleep) {
    constexpr std::chrono::microseconds kSpin{100}, kYield{1000};
    const auto start = std::chrono::steady_clock::now();
    for (int checks = 1; pending(); ++checks) {
      if (checks % 256 != 0) continue;
      const auto waited = std::chrono::steady_clock::now() - start;
      if (waited > kYield) {
        sleep();
      } else if (waited > kSpin) {
        std::this_thread::yield();
      }
    }
  }

  void stop() {
    stop_.store(true);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    for (std::thread& w : workers_) w.join();
    workers_.clear();
  }

  std::vector<std::thread> workers_;
  std::mutex busy_;
  // The current loop, written by run() before the generation bump that publishes it.
  int64_t n_ = 0;
  int chunks_ = 0;
  detail::ChunkFn fn_ = nullptr;
  void* ctx_ = nullptr;
  std::exception_ptr error_;
  std::mutex error_mutex_;
  std::atomic<uint32_t> generation_{0};
  std::atomic<uint64_t> claims_{0};
  std::atomic<int> done_{0};  // chunks of the current loop finished
  std::atomic<bool> stop_{false};
};

int default_threads() {
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// The pool, created on first use. Readers take the pointer without a lock (every op asks for
// it); creating and replacing it happen under the mutex.
std::mutex g_pool_mutex;
std::unique_ptr<Pool> g_pool;
std::atomic<Pool*> g_pool_ptr{nullptr};

// On failure the previous pool stays in place.
void replace_pool(int threads) {
  openblas_set_num_threads(1);  // each of our threads runs its own share of a product
  auto fresh = std::make_unique<Pool>(threads);
  g_pool_ptr.store(nullptr, std::memory_order_release);
  g_pool = std::move(fresh);
  g_pool_ptr.store(g_pool.get(), std::memory_order_release);
}

Pool& pool() {
  if (Pool* p = g_pool_ptr.load(std::memory_order_acquire)) return *p;
  std::lock_guard lock(g_pool_mutex);
  if (!g_pool) replace_pool(default_threads());
  return *g_pool;
}

}  // namespace

void set_num_threads(int threads) {
  TG_CHECK(threads > 0 && threads <= kMaxThreads,
           "set_num_threads: thread count must be in [1, {}], got {}", kMaxThreads, threads);
  std::lock_guard lock(g_pool_mutex);
  replace_pool(threads);
}

int num_threads() { return pool().threads(); }

namespace detail {

int chunk_count(int64_t n, int64_t grain) {
  if (t_in_chunk) return 1;
  const int64_t by_size = n / std::max<int64_t>(1, grain);
  return static_cast<int>(std::clamp<int64_t>(by_size, 1, num_threads()));
}

void run_chunks(int64_t n, int chunks, ChunkFn fn, void* ctx) {
  if (profile::t_current == nullptr) {
    pool().run(n, chunks, fn, ctx);
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  pool().run(n, chunks, fn, ctx);
  profile::note_loop(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

}  // namespace detail

}  // namespace tapegrad
