// Optimizers over a module's named parameters, with PyTorch's update rules and defaults:
// SGD (momentum, dampening, Nesterov, weight decay), Adam (L2 weight decay added to the
// gradient) and AdamW (decoupled weight decay, Loshchilov & Hutter 2019).
//
// step() updates every parameter that has a gradient, in place and unrecorded. The per-parameter
// buffers and the step count are the optimizer's state; state() / load_state() carry them in
// and out of a checkpoint under the names "<buffer>.<parameter name>".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tapegrad/nn/module.h"

// Optimizers, gradient clipping and learning-rate schedules.
namespace tapegrad::optim {

using nn::NamedTensors;

class Optimizer {
 public:
  Optimizer(std::string type_name, NamedTensors params, double lr);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  void step();
  void zero_grad();
  double lr() const { return lr_; }
  void set_lr(double lr);
  int64_t step_count() const { return steps_; }
  // The parameters it updates, by name, as it was given them.
  const NamedTensors& params() const { return params_; }

  // Buffers and the step count ("step", a one-element int64 tensor).
  NamedTensors state() const;
  // Restores what state() gave; names and shapes must match this optimizer's, the step count
  // must be non-negative and every value finite.
  void load_state(const NamedTensors& state);

 protected:
  // Updates elements [begin, end) of one parameter; `index` selects its buffers. step() splits
  // the elements of all parameters between threads, so one call may get part of a parameter;
  // an update must touch only its own elements.
  virtual void update(size_t index, Tensor& param, const Tensor& grad, int64_t begin,
                      int64_t end) = 0;
  // Per-parameter buffers, named (e.g. "exp_avg"), zero-initialised like the parameter.
  void add_buffer(const std::string& name);
  Tensor& buffer(size_t buffer_index, size_t param_index) {
    return buffers_[buffer_index].second[param_index];
  }

  std::string type_name_;
  NamedTensors params_;
  // step()'s list of the parameters with a gradient, a member so its memory is allocated once
  // (a request over 1 KiB makes glibc merge its fast bins first, every step)
  struct Slice {
    size_t index;
    int64_t start;  // of this parameter in the concatenation
    Tensor grad;
  };
  std::vector<Slice> slices_;
  double lr_;
  int64_t steps_ = 0;

 private:
  std::vector<std::pair<std::string, std::vector<Tensor>>> buffers_;
};

// SGDOptions{.lr = 0.1, .momentum = 0.9}
struct SGDOptions {
  double lr = 0.01;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

class SGD : public Optimizer {
 public:
  SGD(NamedTensors params, const SGDOptions& options);

 private:
  void update(size_t index, Tensor& param, const Tensor& grad, int64_t begin, int64_t end) override;
  SGDOptions options_;
};

// AdamOptions{.lr = 3e-4, .weight_decay = 0.01}
struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;  // Adam: L2 through the gradient; AdamW: decoupled
  // Weight decay only on parameters of two or more dimensions (weights and embeddings), never
  // on biases and norms: the two parameter groups of nanoGPT's and most recipes' AdamW.
  bool decay_matrices_only = false;
};

class Adam : public Optimizer {
 public:
  Adam(NamedTensors params, const AdamOptions& options);

 protected:
  Adam(std::string type_name, NamedTensors params, const AdamOptions& options, bool decoupled);

 private:
  void update(size_t index, Tensor& param, const Tensor& grad, int64_t begin, int64_t end) override;
  AdamOptions options_;
  bool decoupled_;
};

// Adam with decoupled weight decay; PyTorch's default weight_decay for AdamW is 0.01.
class AdamW : public Adam {
 public:
  AdamW(NamedTensors params, const AdamOptions& options = {.weight_decay = 0.01});
};

// Scales all gradients together so their global L2 norm is at most max_norm (as
// torch.nn.utils.clip_grad_norm_) and returns the norm before clipping.
double clip_grad_norm(const NamedTensors& params, double max_norm);

}  // namespace tapegrad::optim
