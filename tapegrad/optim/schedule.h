// Learning-rate schedules: the learning rate as a function of the step number (from 1). A
// schedule holds no position of its own; the optimizer's step count is the position, so a
// resumed run continues the schedule exactly.
#pragma once

#include <cstdint>

namespace tapegrad::optim {

class Schedule {
 public:
  virtual ~Schedule() = default;
  virtual double lr(int64_t step) const = 0;
};

class ConstantSchedule : public Schedule {
 public:
  explicit ConstantSchedule(double lr);
  double lr(int64_t step) const override;

 private:
  double lr_;
};

// The paper's schedule (section 5.3): factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5).
// It rises linearly for `warmup` steps, then decays as the inverse square root of the step.
class NoamSchedule : public Schedule {
 public:
  NoamSchedule(int64_t d_model, int64_t warmup, double factor = 1.0);
  double lr(int64_t step) const override;

 private:
  int64_t d_model_, warmup_;
  double factor_;
};

// Linear warmup from 0 to peak over `warmup` steps, then a cosine decay to min_lr at `total`
// steps, and min_lr after.
class WarmupCosineSchedule : public Schedule {
 public:
  WarmupCosineSchedule(double peak, int64_t warmup, int64_t total, double min_lr = 0.0);
  double lr(int64_t step) const override;

 private:
  double peak_;
  int64_t warmup_, total_;
  double min_lr_;
};

}  // namespace tapegrad::optim
