// Module: the base of every layer. A module registers its parameters, buffers and child
// modules by name, which gives dotted recursive names ("encoder.layers.0.self_attn.q_proj.weight")
// that are also the checkpoint keys. Modules are neither copied nor moved: registration keeps
// pointers to their members. Children are held by shared_ptr, as in the PyTorch C++ frontend.
//
// Each module has its own forward(...) with the signature that fits it; there is no virtual
// forward.
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

namespace tapegrad::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// The name of the first tensor that holds a NaN or an infinity, or nullopt when all are finite.
std::optional<std::string> find_nonfinite(const NamedTensors& tensors);

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

 protected:
  // Registers a member tensor; parameters are made leaves that require grad.
  void register_parameter(std::string name, Tensor& member);
  void register_buffer(std::string name, Tensor& member);
  template <class M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> child) {
    add_child(std::move(name), child);
    return child;
  }
  // Reports `out`'s shape to the shape trace when one is active (see ShapeTrace).
  const Tensor& traced(const Tensor& out) const;
  // Opened at the top of forward: while a ProfileGuard is on, the ops until the scope closes
  // are charged to this module's path (profile.h). One thread-local check when off.
  profile::ModuleScope profiled() const { return profile::ModuleScope(path_); }
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
  std::vector<std::shared_ptr<M>> items_;
};

// While a ShapeTrace is alive on this thread, every module forward reports
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
