// Storage: a tensor's buffer, and the byte counters the memory tests watch.
#include "tapegrad/autograd/storage.h"

#include <atomic>

#include "tapegrad/profile/profile.h"

namespace tapegrad {

namespace {
std::atomic<size_t> g_bytes_in_use{0};
std::atomic<size_t> g_peak_in_use{0};
}  // namespace

Storage::Storage(size_t nbytes) : data_(detail::allocate(nbytes)), nbytes_(nbytes) {
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
