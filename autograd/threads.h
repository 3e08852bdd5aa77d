// The threading plan: matrix products run on OpenBLAS's threads, everything else on the calling
// thread, so the two never compete for cores. set_num_threads sets OpenBLAS's thread count.
#pragma once

namespace tapegrad {

void set_num_threads(int threads);
int num_threads();

}  // namespace tapegrad
