// What the learner's edition (-DTAPEGRAD_FAST=OFF) links in place of the fast room: no fast
// ops (every op runs its plain kernel or its reference), a parallel_for that is a plain loop,
// and buffers straight from the system allocator.
#include <new>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/ops/registry.h"
#include "tapegrad/autograd/storage.h"
#include "tapegrad/autograd/threads.h"

namespace tapegrad {

const FastOps* installed_fast_ops() { return nullptr; }

namespace {
int g_threads = 1;  // what set_num_threads asked for; the loops run on the caller alone
}  // namespace

void set_num_threads(int threads) {
  TG_CHECK(threads > 0 && threads <= kMaxThreads,
           "set_num_threads: thread count must be in [1, {}], got {}", kMaxThreads, threads);
  g_threads = threads;
}
int num_threads() { return g_threads; }
int detail::chunk_count(int64_t, int64_t) { return 1; }
void detail::run_chunks(int64_t n, int, ChunkFn fn, void* ctx) { fn(ctx, 0, n); }

void* detail::allocate(size_t nbytes) { return ::operator new(nbytes, kStorageAlignment); }
void detail::deallocate(void* data, size_t, size_t) { ::operator delete(data, kStorageAlignment); }
size_t storage_bytes_cached() { return 0; }
void release_cached_storage() {}

}  // namespace tapegrad
