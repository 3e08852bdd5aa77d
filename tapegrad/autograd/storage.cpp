// Storage: a tensor's buffer, and the byte counters the memory tests watch.
#include "tapegrad/autograd/storage.h"

#include <atomic>
#include <chrono>

#include "tapegrad/profile/profile.h"

namespace tapegrad {

namespace {
std::atomic<size_t> g_bytes_in_use{0};
std::atomic<size_t> g_peak_in_use{0};
std::atomic<void (*)()> g_interrupt_check{nullptr};
std::atomic<int64_t> g_last_check{0};  // in steady_clock's milliseconds

void* allocate_interruptibly(size_t nbytes) {
  if (const auto check = g_interrupt_check.load(std::memory_order_relaxed)) {
    const int64_t now =
        std::chrono::steady_clock::now().time_since_epoch() / std::chrono::milliseconds(1);
    if (now - g_last_check.load(std::memory_order_relaxed) >= 50) {
      g_last_check.store(now, std::memory_order_relaxed);
      check();  // may throw: nothing is allocated yet
    }
  }
  return detail::allocate(nbytes);
}
}  // namespace

void set_interrupt_check(void (*check)()) { g_interrupt_check.store(check); }

Storage::Storage(size_t nbytes) : data_(allocate_interruptibly(nbytes)), nbytes_(nbytes) {
  profile::note_bytes(static_cast<int64_t>(nbytes));
  const size_t now = g_bytes_in_use += nbytes_;
  size_t peak = g_peak_in_use.load();
  while (now > peak && !g_peak_in_use.compare_exchange_weak(peak, now)) {
  }
}

Storage::~Storage() {
  detail::deallocate(data_, nbytes_, g_peak_in_use.load());
  g_bytes_in_use -= nbytes_;
}

size_t storage_bytes_in_use() { return g_bytes_in_use.load(); }

}  // namespace tapegrad
