// The test binaries' main: Catch2's, after setting the thread count from TAPEGRAD_TEST_THREADS
// when it is given, so that a run on a one-core machine (or under ThreadSanitizer, in CI)
// still splits every parallel kernel between threads.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "tapegrad/autograd/threads.h"

int main(int argc, char* argv[]) {
  if (const char* threads = std::getenv("TAPEGRAD_TEST_THREADS")) {
    tapegrad::set_num_threads(std::stoi(threads));
  }
  return Catch::Session().run(argc, argv);
}
