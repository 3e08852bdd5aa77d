// Module: the base of every layer. A module registers its parameters, buffers and child
// modules by name, which gives dotted recursive names ("encoder.layers.0.self_attn.q_proj.weight")
// that are also the checkpoint keys. Modules are neither copied nor moved: registration keeps
// pointers to their members. Children are held by shared_ptr (Child), as in the PyTorch C++
// frontend.
//
// Each module has its own forward(...) with the signature that fits it, holding the math only;
// there is no virtual forward. What happens around every forward (the profiler's module scope,
// the shape trace) is the module call's: call(m, ...), which a Child's call operator runs.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tapegrad/autograd/tensor.h"
#include "tapegrad/profile/profile.h"

// Modules with named parameters, the transformer's layers and models, checkpoints, decoding.
namespace tapegrad::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// The name of the first tensor that holds a NaN or an infinity, or nullopt when all are finite.
std::optional<std::string> find_nonfinite(const NamedTensors& tensors);

// The module call, as PyTorch's Module.__call__: m.forward(args...), with the ops it runs
// charged to m's path while profiling and its output's shape reported while tracing. A parent
// calls a child through its Child handle; a program calls its model with call(model, ...).
template <class M, class... Args>
Tensor call(M& m, Args&&... args) {
  const auto profiled_scope = m.profiled();
  return m.traced(m.forward(std::forward<Args>(args)...));
}

// A child module as its parent holds it: a shared_ptr whose call operator is the module call,
// so that a forward reads as PyTorch's does: linear2(dropout(linear1(x))).
template <class M>
class Child : public std::shared_ptr<M> {
 public:
  Child() = default;
  Child(std::shared_ptr<M> m) : std::shared_ptr<M>(std::move(m)) {}
  template <class... Args>
  Tensor operator()(Args&&... args) const {
    return call(**this, std::forward<Args>(args)...);
  }
};

class Module {
 public:
  explicit Module(std::string type_name) : type_name_(std::move(type_name)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  Module(Module&&) = delete;
  Module& operator=(Module&&) = delete;

  // Registration order, depth first: own tensors, then each child's.
  NamedTensors named_parameters() const;
  std::vector<Tensor> parameters() const;
  NamedTensors named_buffers() const;
  // Parameters and buffers: what a checkpoint holds.
  NamedTensors state() const;
  std::vector<std::pair<std::string, Module*>> named_modules();
  int64_t num_parameters() const;

  // train() / eval() set the mode of this module and every descendant (dropout reads it).
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  void zero_grad();
  // Converts every parameter and floating buffer, e.g. to float64 for a gradcheck.
  void to(DType dtype);

  // The module tree with each tensor's shape and the parameter counts.
  std::string summary() const;
  const std::string& type_name() const { return type_name_; }
  // The dotted path from the root, set when registered ("" for the root).
  const std::string& path() const { return path_; }

  // Replaces a registered parameter or buffer's tensor (checkpoint loading).
  void assign(std::string_view dotted_name, const Tensor& value);

  // The two halves of a module call (call()): while a ProfileGuard is on, the ops run until the
  // returned scope closes are charged to this module's path (profile.h); while a ShapeTrace is
  // alive, `out`'s shape is reported. One thread-local check each when off.
  profile::ModuleScope profiled() const { return profile::ModuleScope(path_); }
  const Tensor& traced(const Tensor& out) const;

 protected:
  // Registers a member tensor; parameters are made leaves that require grad.
  void register_parameter(std::string name, Tensor& member);
  void register_buffer(std::string name, Tensor& member);
  template <class M>
  Child<M> register_module(std::string name, std::shared_ptr<M> child) {
    add_child(std::move(name), child);
    return child;
  }
  // Reports a shape inside this module's forward ("<path> <Type> <what>: shape"), for what has
  // no tensor of its own (a fused op's per-head scores); check tracing() first.
  static bool tracing();
  void trace_shape(std::string_view what, const Shape& shape) const;

 private:
  struct Slot {
    std::string name;
    Tensor* tensor;
  };
  void check_name(const std::string& name) const;
  void add_child(std::string name, std::shared_ptr<Module> child);
  void set_path(const std::string& path);
  void collect(const std::string& prefix, bool params, bool buffers, NamedTensors& out) const;
  void summarize(std::string& out, const std::string& name, int depth) const;

  std::string type_name_;
  std::string path_;
  bool training_ = true;
  std::vector<Slot> parameters_;
  std::vector<Slot> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

// A numbered list of child modules, registered as "0", "1", ...
template <class M>
class ModuleList : public Module {
 public:
  ModuleList() : Module("ModuleList") {}
  void push_back(std::shared_ptr<M> m) {
    items_.push_back(register_module(std::to_string(items_.size()), std::move(m)));
  }
  size_t size() const { return items_.size(); }
  M& operator[](size_t i) const { return *items_.at(i); }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  std::vector<Child<M>> items_;
};

// While a ShapeTrace is alive on this thread, every module call (call()) reports
// "<path> <Type>: [B, T, C]" to the sink, the way the seed notebooks print each tensor's shape
// through the encoder. Without one, tracing costs one thread-local check per forward.
class ShapeTrace {
 public:
  using Sink = std::function<void(std::string_view line)>;
  explicit ShapeTrace(Sink sink);
  ~ShapeTrace();
  ShapeTrace(const ShapeTrace&) = delete;
  ShapeTrace& operator=(const ShapeTrace&) = delete;

 private:
  Sink previous_;
};

}  // namespace tapegrad::nn
