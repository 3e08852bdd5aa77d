// The caching allocator behind Storage (detail::allocate in storage.h): a freed buffer is kept
// for the next request of its rounded size, so a training step, which allocates the same
// shapes every time, stops paying for fresh pages (page faults) and malloc. The learner's
// edition allocates from the system instead (learner_edition.cpp).
#include <algorithm>
#include <bit>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "tapegrad/autograd/storage.h"

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
#endif

namespace tapegrad {

namespace {

// The caching allocator behind Storage. Sizes are rounded up (to 64 bytes, or to 1/16 of their
// power of two above 4 KiB) so near-equal requests share buckets; each bucket is a stack of
// freed buffers. The cache holds at most the program's peak of live bytes plus 256 MiB, so
// memory stays under about twice the peak; a buffer that does not fit is freed. AddressSanitizer
// is told that cached buffers are off limits, so a use after free is still caught.
class BufferCache {
 public:
  static constexpr size_t kSlack = size_t{256} << 20;

  static size_t rounded(size_t n) {
    n = std::max<size_t>(n, 64);
    if (n <= 4096) return (n + 63) & ~size_t{63};
    const size_t step = std::bit_floor(n) / 16;
    return (n + step - 1) / step * step;
  }

  void* take(size_t bytes) {
    {
      std::lock_guard lock(mutex_);
      auto it = free_.find(bytes);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        cached_ -= bytes;
        unpoison(p, bytes);
        return p;
      }
    }
    return ::operator new(bytes, detail::kStorageAlignment);
  }

  void give(void* p, size_t bytes, size_t peak_in_use) {
    std::lock_guard lock(mutex_);
    if (cached_ + bytes > peak_in_use + kSlack) {
      ::operator delete(p, detail::kStorageAlignment);
      return;
    }
    poison(p, bytes);
    free_[bytes].push_back(p);
    cached_ += bytes;
  }

  size_t cached() {
    std::lock_guard lock(mutex_);
    return cached_;
  }

  void release() {
    std::lock_guard lock(mutex_);
    release_locked();
  }

  BufferCache() = default;
  BufferCache(const BufferCache&) = delete;
  BufferCache& operator=(const BufferCache&) = delete;
  ~BufferCache() { release_locked(); }

 private:
  void release_locked() {
    for (auto& [bytes, list] : free_) {
      for (void* p : list) {
        unpoison(p, bytes);
        ::operator delete(p, detail::kStorageAlignment);
      }
    }
    free_.clear();
    cached_ = 0;
  }
  static void poison([[maybe_unused]] void* p, [[maybe_unused]] size_t n) {
#ifdef __SANITIZE_ADDRESS__
    ASAN_POISON_MEMORY_REGION(p, n);
#endif
  }
  static void unpoison([[maybe_unused]] void* p, [[maybe_unused]] size_t n) {
#ifdef __SANITIZE_ADDRESS__
    ASAN_UNPOISON_MEMORY_REGION(p, n);
#endif
  }

  std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  size_t cached_ = 0;
};

// Never destroyed: Storage objects in other statics may be freed after it would be.
BufferCache& buffer_cache() {
  static auto* cache = new BufferCache();
  return *cache;
}

}  // namespace

void* detail::allocate(size_t nbytes) { return buffer_cache().take(BufferCache::rounded(nbytes)); }
void detail::deallocate(void* data, size_t nbytes, size_t peak_in_use) {
  buffer_cache().give(data, BufferCache::rounded(nbytes), peak_in_use);
}
size_t storage_bytes_cached() { return buffer_cache().cached(); }
void release_cached_storage() { buffer_cache().release(); }

}  // namespace tapegrad
