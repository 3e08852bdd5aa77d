// Storage: the flat buffer behind tensors, and the memory counters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>

namespace tapegrad {

// A flat, 64-byte aligned, uninitialised buffer, from detail::allocate.
class Storage {
 public:
  explicit Storage(size_t nbytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() { return data_; }
  size_t nbytes() const { return nbytes_; }

  // Counts in-place writes made through the library (Tensor::set, optimizer updates). The tape
  // notes it for every input of a recorded op, and backward refuses to run an op whose input
  // was written since, as PyTorch's version counter does: its gradient would be silently wrong.
  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }

 private:
  void* data_;
  size_t nbytes_;
  uint64_t version_ = 0;
};

namespace detail {
constexpr std::align_val_t kStorageAlignment{64};
// Where a Storage's bytes come from and go back to: the fast room's caching allocator
// (fast/buffer_cache.cpp), or the system's in the learner's edition. peak_in_use bounds what
// the cache keeps.
void* allocate(size_t nbytes);
void deallocate(void* data, size_t nbytes, size_t peak_in_use);
}  // namespace detail

// A function the engine calls before it allocates a tensor, at most every 50 ms: the Python
// package's raises KeyboardInterrupt from there after Ctrl-C, so that a long call (a backward, a
// C++ model's forward, decoding) stops within a second. nullptr, the default, calls nothing.
void set_interrupt_check(void (*check)());

// Bytes held by all live Storage objects of the process: the memory tests watch this.
size_t storage_bytes_in_use();
// Bytes of freed buffers kept by the cache for reuse: at most the peak of storage_bytes_in_use()
// plus 256 MiB.
size_t storage_bytes_cached();
// Returns every cached buffer to the system.
void release_cached_storage();

}  // namespace tapegrad
