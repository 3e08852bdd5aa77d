// The fast room's DropoutRun: the mask's elements as its vectorised loops make them, across the
// end of the low 32 bits, one at a time and sixteen lanes at once.
#include "helpers.h"
#include "tapegrad/autograd/fast/fast_room.h"

using namespace tapegrad;

TEST_CASE("a dropout run makes the mask's elements across 2^32", "[autograd]") {
  const DropoutMask mask(0.5, 0x1234);
  typedef uint32_t Lanes __attribute__((vector_size(16 * sizeof(uint32_t))));
  for (const uint64_t start : {uint64_t{0}, (uint64_t{1} << 32) - 5, (uint64_t{7} << 32) + 3}) {
    const DropoutRun run(mask, start);
    Lanes js{};
    for (uint32_t j = 0; j < 16; ++j) js[j] = j;
    const auto flags = run.kept(js);
    for (uint32_t j = 0; j < 16; ++j) {
      INFO("start " << start << " j " << j);
      CHECK(run.kept(j) == mask.keeps(start + j));
      CHECK((flags[j] != 0) == mask.keeps(start + j));
    }
  }
}
