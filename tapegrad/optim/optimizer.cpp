// The optimizers' shared step over all parameters' elements, SGD, Adam and AdamW updates,
// state in and out of checkpoints (checked finite), gradient clipping and the finiteness scan.
#include "tapegrad/optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "tapegrad/autograd/tape.h"
#include "tapegrad/autograd/threads.h"
#include "tapegrad/profile/profile.h"

namespace tapegrad::optim {

Optimizer::Optimizer(std::string type_name, NamedTensors params, double lr)
    : type_name_(std::move(type_name)), params_(std::move(params)), lr_(lr) {
  set_lr(lr);
  std::set<std::string> names;
  for (const auto& [name, p] : params_) {
    TG_CHECK(p.requires_grad() && p.is_leaf() && p.is_contiguous(),
             "{}: parameter '{}' must be a contiguous leaf that requires grad", type_name_, name);
    TG_CHECK(names.insert(name).second, "{}: parameter '{}' given twice", type_name_, name);
  }
}

void Optimizer::set_lr(double lr) {
  TG_CHECK(std::isfinite(lr) && lr >= 0, "{}: learning rate must be finite and >= 0, got {}",
           type_name_, lr);
  lr_ = lr;
}

void Optimizer::add_buffer(const std::string& name) {
  std::vector<Tensor> per_param;
  for (const auto& [pname, p] : params_) per_param.push_back(zeros(p.shape(), p.dtype()));
  buffers_.emplace_back(name, std::move(per_param));
}

// All parameters' elements laid end to end, split between threads in one parallel loop: a
// model of many small tensors (biases, norms) keeps both cores busy, and the split is the same
// for any set of sizes, so it does not depend on which thread finishes first.
void Optimizer::step() {
  const profile::Scope profile_scope("optimizer step");
  NoGradGuard no_grad;
  ++steps_;
  slices_.clear();  // empty unless the last step threw
  int64_t total = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor g = params_[i].second.grad();
    if (!g.defined()) continue;
    slices_.push_back({i, total, g});
    total += g.numel();
    params_[i].second.impl().storage->bump_version();
  }
  parallel_for(total, kGrainElements, [&](int64_t b, int64_t e) {
    // the first slice that ends after b
    auto it = std::upper_bound(slices_.begin(), slices_.end(), b, [](int64_t x, const Slice& s) {
      return x < s.start + s.grad.numel();
    });
    for (; it != slices_.end() && it->start < e; ++it) {
      const int64_t n = it->grad.numel();
      update(it->index, params_[it->index].second, it->grad, std::max<int64_t>(b - it->start, 0),
             std::min<int64_t>(e - it->start, n));
    }
  });
  slices_.clear();  // the gradients' buffers go back with zero_grad; the list's memory stays
}

void Optimizer::zero_grad() {
  for (auto& [name, p] : params_) p.zero_grad();
}

NamedTensors Optimizer::state() const {
  NamedTensors out{{"step", tensor({static_cast<double>(steps_)}, {1}, DType::Int64)}};
  for (const auto& [bname, per_param] : buffers_) {
    for (size_t i = 0; i < params_.size(); ++i) {
      out.emplace_back(bname + "." + params_[i].first, per_param[i]);
    }
  }
  return out;
}

void Optimizer::load_state(const NamedTensors& state) {
  const NamedTensors mine = this->state();
  TG_CHECK(state.size() == mine.size(), "{}: state has {} tensors, expected {}", type_name_,
           state.size(), mine.size());
  for (size_t i = 0; i < mine.size(); ++i) {
    const auto& [name, t] = state[i];
    TG_CHECK(name == mine[i].first && t.shape() == mine[i].second.shape() &&
                 t.dtype() == mine[i].second.dtype(),
             "{}: state entry {} is '{}' {} {}, expected '{}' {} {}", type_name_, i, name,
             t.shape(), t.dtype(), mine[i].first, mine[i].second.shape(), mine[i].second.dtype());
  }
  TG_CHECK(state[0].second.item() >= 0, "{}: state 'step' is negative: {}", type_name_,
           state[0].second.item());
  const auto bad = nn::find_nonfinite(state);
  TG_CHECK(!bad, "{}: state '{}' holds NaN or Inf", type_name_, bad.value_or(""));
  steps_ = static_cast<int64_t>(state[0].second.item());
  size_t k = 1;
  for (auto& [bname, per_param] : buffers_) {
    for (Tensor& b : per_param) b = state[k++].second.clone();
  }
}

// ---------------------------------------------------------------------------------------------

SGD::SGD(NamedTensors params, const SGDOptions& options)
    : Optimizer("SGD", std::move(params), options.lr), options_(options) {
  TG_CHECK(options.momentum >= 0 && options.weight_decay >= 0,
           "SGD: momentum and weight_decay must be >= 0, got {} and {}", options.momentum,
           options.weight_decay);
  TG_CHECK(!options.nesterov || (options.momentum > 0 && options.dampening == 0),
           "SGD: Nesterov momentum needs momentum > 0 and dampening 0");
  if (options.momentum > 0) add_buffer("momentum_buffer");
}

// g += wd p;  buf = g on the first step, else momentum buf + (1 - dampening) g;
// g = nesterov ? g + momentum buf : buf;  p -= lr g
void SGD::update(size_t index, Tensor& param, const Tensor& grad, int64_t begin, int64_t end) {
  const SGDOptions o = options_;
  const bool first = steps_ == 1;
  dispatch_floating("SGD", param.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* p = param.data<T>();
    const T* g = grad.data<T>();
    T* buf = o.momentum > 0 ? buffer(0, index).template data<T>() : nullptr;
    for (int64_t i = begin; i < end; ++i) {
      double d = g[i] + o.weight_decay * p[i];
      if (buf) {
        buf[i] = static_cast<T>(first ? d : o.momentum * buf[i] + (1 - o.dampening) * d);
        d = o.nesterov ? d + o.momentum * buf[i] : buf[i];
      }
      p[i] = static_cast<T>(p[i] - lr_ * d);
    }
  });
}

Adam::Adam(NamedTensors params, const AdamOptions& options)
    : Adam("Adam", std::move(params), options, false) {}

Adam::Adam(std::string type_name, NamedTensors params, const AdamOptions& options, bool decoupled)
    : Optimizer(std::move(type_name), std::move(params), options.lr),
      options_(options),
      decoupled_(decoupled) {
  TG_CHECK(options.beta1 >= 0 && options.beta1 < 1 && options.beta2 >= 0 && options.beta2 < 1,
           "{}: betas must be in [0, 1), got ({}, {})", type_name_, options.beta1, options.beta2);
  TG_CHECK(options.eps >= 0 && options.weight_decay >= 0,
           "{}: eps and weight_decay must be >= 0, got {} and {}", type_name_, options.eps,
           options.weight_decay);
  add_buffer("exp_avg");
  add_buffer("exp_avg_sq");
}

// Adam:  g += wd p                      AdamW: p -= lr wd p
// m = b1 m + (1 - b1) g ;  v = b2 v + (1 - b2) g^2
// p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
void Adam::update(size_t index, Tensor& param, const Tensor& grad, int64_t begin, int64_t end) {
  const AdamOptions o = options_;
  const auto t = static_cast<double>(steps_);
  const double step_size = lr_ / (1 - std::pow(o.beta1, t));
  const double sqrt_bc2 = std::sqrt(1 - std::pow(o.beta2, t));
  const double weight_decay = o.decay_matrices_only && param.dim() < 2 ? 0.0 : o.weight_decay;
  const double decay = decoupled_ ? 1 - lr_ * weight_decay : 1.0;
  const double l2 = decoupled_ ? 0.0 : weight_decay;
  // In the parameter's precision, as PyTorch does: float32 loops vectorise.
  dispatch_floating(type_name_, param.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T b1 = o.beta1, b2 = o.beta2, eps = o.eps, wd = l2, keep = decay;
    const T step = step_size, inv_sqrt_bc2 = 1 / sqrt_bc2;
    T* p = param.data<T>();
    const T* g = grad.data<T>();
    T* m = buffer(0, index).template data<T>();
    T* v = buffer(1, index).template data<T>();
    for (int64_t i = begin; i < end; ++i) {
      const T gi = g[i] + wd * p[i];
      m[i] = b1 * m[i] + (1 - b1) * gi;
      v[i] = b2 * v[i] + (1 - b2) * gi * gi;
      p[i] = p[i] * keep - step * m[i] / (std::sqrt(v[i]) * inv_sqrt_bc2 + eps);
    }
  });
}

AdamW::AdamW(NamedTensors params, const AdamOptions& options)
    : Adam("AdamW", std::move(params), options, true) {}

namespace {
// The sum of squares of n values in double, as eight interleaved partial sums added at the end:
// a fixed order (the same sum on every run and resume) without one long chain of dependent
// additions, which the compiler cannot reorder into vector lanes itself.
template <class T>
double sum_of_squares(const T* d, int64_t n) {
  constexpr int64_t kLanes = 8;
  double lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int64_t k = 0; k < kLanes; ++k) lanes[k] += static_cast<double>(d[i + k]) * d[i + k];
  }
  double total = 0;
  for (; i < n; ++i) total += static_cast<double>(d[i]) * d[i];
  for (const double lane : lanes) total += lane;
  return total;
}
}  // namespace

double clip_grad_norm(const NamedTensors& params, double max_norm) {
  const profile::Scope profile_scope("clip_grad_norm");
  TG_CHECK(max_norm > 0, "clip_grad_norm: max_norm must be positive, got {}", max_norm);
  double total = 0;
  for (const auto& [name, p] : params) {
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    dispatch_floating("clip_grad_norm", g.dtype(), [&](auto tag) {
      using T = decltype(tag);
      total += sum_of_squares(g.data<T>(), g.numel());
    });
  }
  const double norm = std::sqrt(total);
  const double coef = max_norm / (norm + 1e-6);  // PyTorch's epsilon
  if (coef < 1) {
    NoGradGuard no_grad;
    for (const auto& [name, p] : params) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      dispatch_floating("clip_grad_norm", g.dtype(), [&](auto tag) {
        using T = decltype(tag);
        T* d = g.data<T>();
        for (int64_t i = 0, n = g.numel(); i < n; ++i) d[i] = static_cast<T>(d[i] * coef);
      });
    }
  }
  return norm;
}

}  // namespace tapegrad::optim
