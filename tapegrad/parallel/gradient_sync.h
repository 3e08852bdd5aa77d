// Data parallelism's one exchange: every parameter's gradient summed over the processes, so
// each process steps with the gradient of the whole global batch and the optimizer's step is
// the same everywhere. Each process's loss must be its share of the global loss (its sum over
// its examples divided by the global batch's count), so that the sum of the processes'
// gradients is the gradient of the global loss.
//
//   parallel::GradientSync sync(world, model.named_parameters(), 1 << 20);
//   loss.backward();        // full buckets start summing while backward goes on
//   sync.finish();          // waits; each .grad() now holds the sum over processes
//   optimizer.step();
//
// Buckets (bucket_bytes > 0): the parameters, in the reverse of their order (roughly the order
// backward completes them), are cut into buckets of about bucket_bytes. A hook on each
// parameter copies its gradient into its bucket the moment it is complete; when a bucket is
// full its sum starts in the background (World::start_sum), buckets always in the same order
// on every process, as MPI requires. bucket_bytes 0: one sum of everything in finish(), after
// backward. In a world of one, nothing is registered and finish() does nothing.
#pragma once

#include <cstdint>
#include <vector>

#include "tapegrad/autograd/tensor.h"
#include "tapegrad/nn/module.h"
#include "tapegrad/parallel/world.h"

namespace tapegrad::parallel {

class GradientSync {
 public:
  // Float32 parameters that require gradients.
  GradientSync(const World& world, nn::NamedTensors params, int64_t bucket_bytes);
  ~GradientSync();  // removes its hooks: the parameters outlive it
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  // After each backward (one backward between two finish() calls): the buckets not yet
  // started (a parameter that received no gradient counts as zeros) are started, all are
  // waited for, and the sums written into the parameters' .grad(). Throws when a parameter has
  // no gradient here but a nonzero sum (the processes ran different graphs).
  void finish();
  int64_t buckets() const { return static_cast<int64_t>(buckets_.size()); }

 private:
  struct Bucket {
    std::vector<size_t> params;  // indices into params_
    std::vector<float> values;
    int64_t ready = 0;
    AsyncSum sum;
  };
  void on_gradient(size_t param, const Tensor& grad);
  void start_ready_buckets();

  const World& world_;
  nn::NamedTensors params_;
  std::vector<size_t> bucket_of_, offset_of_;
  std::vector<bool> delivered_;
  std::vector<Bucket> buckets_;
  size_t next_ = 0;  // the first bucket not started
  std::vector<HookHandle> hooks_;
};

}  // namespace tapegrad::parallel
