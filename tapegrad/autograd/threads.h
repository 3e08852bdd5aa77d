// The threading plan: one pool of threads runs everything parallel in tapegrad, matrix
// products included: each of our threads runs the gemm kernel on its own share of a product
// (a range of batch items, or of output rows); elementwise, softmax, layer norm and optimizer
// loops split the same way. OpenBLAS (float64 products only) is kept at one thread so its
// threads never spin against ours. The split of a loop depends only on its size, its grain and the
// thread count, never on timing, so a run is reproducible for a given thread count.
//
// The pool is the fast room's (fast/thread_pool.cpp): its workers spin briefly between loops (a
// training step issues them back to back) and then sleep, so an idle program does not burn a
// core. In the learner's edition (-DTAPEGRAD_FAST=OFF) parallel_for is a plain loop.
#pragma once

#include <cstdint>
#include <type_traits>

namespace tapegrad {

// The pool's size, counting the calling thread. The default is the machine's core count.
// Set it between pieces of work, not while another thread of the program runs one. A thread
// count the system cannot start throws Error and keeps the previous pool.
constexpr int kMaxThreads = 1024;
void set_num_threads(int threads);
int num_threads();

namespace detail {
using ChunkFn = void (*)(void* ctx, int64_t begin, int64_t end);
// How many chunks parallel_for splits n items into: 1 for small loops and inside a chunk.
int chunk_count(int64_t n, int64_t grain);
void run_chunks(int64_t n, int chunks, ChunkFn fn, void* ctx);
}  // namespace detail

// Elements of a simple loop (a few flops each) worth handing to another thread: about the
// work that pays for waking it.
constexpr int64_t kGrainElements = 1 << 13;
// Flops of matrix product worth handing to another thread: about a microsecond of one core.
constexpr double kGrainFlops = 1 << 17;

// The grain, in items, of a loop whose every item (a row, a block) holds `elements` elements.
inline int64_t grain_of_items(int64_t elements) {
  return kGrainElements / (elements > 0 ? elements : 1) + 1;
}

// Runs f(begin, end) over contiguous ranges covering [0, n), each of at least `grain` items
// (the work that pays for waking a thread, about 10^5 flops), at most one range per thread;
// whichever thread is ready takes the next range (the caller may run several); returns when
// all are done. Ranges never overlap, so f may write its own range without locks. An
// exception thrown by f is rethrown here. A parallel_for inside f runs serially.
template <class F>
void parallel_for(int64_t n, int64_t grain, F&& f) {
  const int chunks = detail::chunk_count(n, grain);
  if (chunks <= 1) {
    if (n > 0) f(int64_t{0}, n);
    return;
  }
  using Fn = std::remove_reference_t<F>;
  detail::run_chunks(
      n, chunks, [](void* ctx, int64_t b, int64_t e) { (*static_cast<Fn*>(ctx))(b, e); }, &f);
}

}  // namespace tapegrad
