// The fast room's buffer cache (fast/buffer_cache.cpp): a freed buffer serves the next request
// of its rounded size. Built with the fast room only.
#include "helpers.h"
#include "tapegrad/autograd/autograd.h"

using namespace tapegrad;

TEST_CASE("freed storage is cached and reused by the next tensor of that size", "[autograd]") {
  release_cached_storage();
  CHECK(storage_bytes_cached() == 0);
  const void* first = nullptr;
  {
    Tensor a = empty({1000});
    first = a.data<float>();
  }
  CHECK(storage_bytes_cached() >= 4000);
  Tensor b = empty({999});  // rounds to the same bucket
  CHECK(b.data<float>() == first);
  CHECK(storage_bytes_cached() == 0);
  release_cached_storage();
}
