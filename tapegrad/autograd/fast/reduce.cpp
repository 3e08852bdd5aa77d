// The fast room's sums of contiguous runs (sum and mean over the last dims, ops/reduce.cpp):
// each run added in double lanes, a long run split into chunks between threads and the
// chunks' sums added in order, so the result does not depend on the thread count.
#include <algorithm>
#include <vector>

#include "tapegrad/autograd/fast/fast_room.h"
#include "tapegrad/autograd/fast/vmath.h"
#include "tapegrad/autograd/threads.h"

namespace tapegrad {

namespace {

// Elements a task folds: a long run (a full sum) splits into chunks of this size.
constexpr int64_t kSumChunk = 1 << 14;

template <class T>
void run_sums(const T* x, int64_t rows, int64_t count, double* sums) {
  const int64_t chunks = std::max<int64_t>(1, (count + kSumChunk - 1) / kSumChunk);
  std::vector<double> partial(static_cast<size_t>(rows * chunks));
  parallel_for(
      rows * chunks, grain_of_items(std::min(count, kSumChunk)), [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
          const int64_t i = t / chunks, c0 = (t % chunks) * kSumChunk;
          const T* run = x + i * count + c0;
          partial[t] = lane_sum_of<double>(std::min(kSumChunk, count - c0), [run](int64_t j) {
            return static_cast<double>(run[j]);
          });
        }
      });
  for (int64_t i = 0; i < rows; ++i) {
    double total = 0;
    for (int64_t c = 0; c < chunks; ++c) total += partial[i * chunks + c];
    sums[i] = total;
  }
}

}  // namespace

void fast_run_sums(const Tensor& x, int64_t rows, int64_t count, double* sums) {
  dispatch_floating("sum", x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    run_sums<T>(x.data<T>(), rows, count, sums);
  });
}

}  // namespace tapegrad
