// Storage: the flat buffer behind tensors, and the memory counters.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tapegrad {

// A flat, 64-byte aligned, uninitialised buffer. Buffers come from a caching allocator: a freed
// buffer is kept for the next request of the same rounded size, so a training step, which
// allocates the same shapes every time, stops paying for fresh pages (page faults) and malloc.
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

// Bytes held by all live Storage objects of the process: the memory tests watch this.
size_t storage_bytes_in_use();
// Bytes of freed buffers kept by the cache for reuse: at most the peak of storage_bytes_in_use()
// plus 256 MiB.
size_t storage_bytes_cached();
// Returns every cached buffer to the system.
void release_cached_storage();

}  // namespace tapegrad
