// Learning-rate schedules: constant, the paper's warmup (Noam) and warmup + cosine.
#include "tapegrad/optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "tapegrad/autograd/error.h"

namespace tapegrad::optim {

namespace {
void check_step(int64_t step) { TG_CHECK(step >= 1, "schedule: steps count from 1, got {}", step); }
}  // namespace

ConstantSchedule::ConstantSchedule(double lr) : lr_(lr) {
  TG_CHECK(std::isfinite(lr) && lr >= 0, "ConstantSchedule: bad learning rate {}", lr);
}

double ConstantSchedule::lr(int64_t step) const {
  check_step(step);
  return lr_;
}

NoamSchedule::NoamSchedule(int64_t d_model, int64_t warmup, double factor)
    : d_model_(d_model), warmup_(warmup), factor_(factor) {
  TG_CHECK(d_model > 0 && warmup > 0 && factor > 0,
           "NoamSchedule: d_model, warmup and factor must be positive, got {}, {}, {}", d_model,
           warmup, factor);
}

double NoamSchedule::lr(int64_t step) const {
  check_step(step);
  const auto s = static_cast<double>(step);
  return factor_ / std::sqrt(static_cast<double>(d_model_)) *
         std::min(1 / std::sqrt(s), s * std::pow(static_cast<double>(warmup_), -1.5));
}

WarmupCosineSchedule::WarmupCosineSchedule(double peak, int64_t warmup, int64_t total,
                                           double min_lr)
    : peak_(peak), warmup_(warmup), total_(total), min_lr_(min_lr) {
  TG_CHECK(peak > 0 && min_lr >= 0 && min_lr <= peak && warmup >= 0 && total > warmup,
           "WarmupCosineSchedule: need peak > 0, 0 <= min_lr <= peak, 0 <= warmup < total; got "
           "peak {} min_lr {} warmup {} total {}",
           peak, min_lr, warmup, total);
}

double WarmupCosineSchedule::lr(int64_t step) const {
  check_step(step);
  if (step <= warmup_) return peak_ * static_cast<double>(step) / static_cast<double>(warmup_);
  if (step >= total_) return min_lr_;
  const double progress =
      static_cast<double>(step - warmup_) / static_cast<double>(total_ - warmup_);
  return min_lr_ + (peak_ - min_lr_) * 0.5 * (1 + std::cos(std::numbers::pi * progress));
}

}  // namespace tapegrad::optim
