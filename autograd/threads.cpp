#include "autograd/threads.h"

#include <cblas.h>

#include "autograd/error.h"

namespace tapegrad {

void set_num_threads(int threads) {
  TG_CHECK(threads > 0, "set_num_threads: thread count must be positive, got {}", threads);
  openblas_set_num_threads(threads);
}

int num_threads() { return openblas_get_num_threads(); }

}  // namespace tapegrad
