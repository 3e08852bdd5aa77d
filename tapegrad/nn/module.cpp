// Module: registration of parameters, buffers and children under dotted names, train/eval,
// dtype conversion, the summary and the shape trace.
#include "tapegrad/nn/module.h"

#include <algorithm>

#include "tapegrad/autograd/tape.h"

namespace tapegrad::nn {

namespace {
thread_local ShapeTrace::Sink t_trace;

std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}
}  // namespace

std::optional<std::string> find_nonfinite(const NamedTensors& tensors) {
  for (const auto& [name, t] : tensors) {
    if (!is_floating(t.dtype())) continue;
    const Tensor c = t.contiguous();
    const bool finite = dispatch_floating("find_nonfinite", c.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* d = c.data<T>();
      T acc = 0;  // 0 * x is NaN exactly when x is NaN or infinite
      for (int64_t i = 0, n = c.numel(); i < n; ++i) acc += 0 * d[i];
      return acc == 0;
    });
    if (!finite) return name;
  }
  return std::nullopt;
}

ShapeTrace::ShapeTrace(Sink sink) : previous_(std::move(t_trace)) { t_trace = std::move(sink); }
ShapeTrace::~ShapeTrace() { t_trace = std::move(previous_); }

const Tensor& Module::traced(const Tensor& out) const {
  if (t_trace) [[unlikely]] {
    t_trace(fmt::format("{} {}: {}", path_.empty() ? "(root)" : path_, type_name_, out.shape()));
  }
  return out;
}

bool Module::tracing() { return static_cast<bool>(t_trace); }

void Module::trace_shape(std::string_view what, const Shape& shape) const {
  if (t_trace)
    t_trace(fmt::format("{} {} {}: {}", path_.empty() ? "(root)" : path_, type_name_, what, shape));
}

void Module::check_name(const std::string& name) const {
  TG_CHECK(!name.empty(), "{}: empty name for a parameter, buffer or module", type_name_);
  TG_CHECK(name.find('.') == std::string::npos, "{}: name '{}' contains a dot", type_name_, name);
  auto taken = [&](const auto& list) {
    return std::any_of(list.begin(), list.end(),
                       [&](const auto& entry) { return entry.first == name; });
  };
  auto slot_taken = [&](const std::vector<Slot>& list) {
    return std::any_of(list.begin(), list.end(), [&](const Slot& s) { return s.name == name; });
  };
  TG_CHECK(!slot_taken(parameters_) && !slot_taken(buffers_) && !taken(children_),
           "{}: name '{}' is already defined", type_name_, name);
}

void Module::register_parameter(std::string name, Tensor& member) {
  check_name(name);
  TG_CHECK(member.defined() && is_floating(member.dtype()),
           "{}: parameter '{}' must be a defined float tensor", type_name_, name);
  member = member.detach();
  member.set_requires_grad(true);
  parameters_.push_back({std::move(name), &member});
}

void Module::register_buffer(std::string name, Tensor& member) {
  check_name(name);
  TG_CHECK(member.defined(), "{}: buffer '{}' is undefined", type_name_, name);
  buffers_.push_back({std::move(name), &member});
}

void Module::add_child(std::string name, std::shared_ptr<Module> child) {
  check_name(name);
  TG_CHECK(child != nullptr, "{}: child module '{}' is null", type_name_, name);
  child->set_path(join(path_, name));
  children_.emplace_back(std::move(name), std::move(child));
}

void Module::set_path(const std::string& path) {
  path_ = path;
  for (auto& [name, child] : children_) child->set_path(join(path_, name));
}

void Module::collect(const std::string& prefix, bool params, bool buffers,
                     NamedTensors& out) const {
  if (params) {
    for (const Slot& s : parameters_) out.emplace_back(join(prefix, s.name), *s.tensor);
  }
  if (buffers) {
    for (const Slot& s : buffers_) out.emplace_back(join(prefix, s.name), *s.tensor);
  }
  for (const auto& [name, child] : children_) {
    child->collect(join(prefix, name), params, buffers, out);
  }
}

NamedTensors Module::named_parameters() const {
  NamedTensors out;
  collect("", true, false, out);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

NamedTensors Module::named_buffers() const {
  NamedTensors out;
  collect("", false, true, out);
  return out;
}

NamedTensors Module::state() const {
  NamedTensors out;
  collect("", true, true, out);
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out{{"", this}};
  for (auto& [name, child] : children_) {
    for (auto& [sub, m] : child->named_modules()) out.emplace_back(join(name, sub), m);
  }
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const auto& [name, t] : named_parameters()) n += t.numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::zero_grad() {
  for (const Slot& s : parameters_) s.tensor->zero_grad();
  for (auto& [name, child] : children_) child->zero_grad();
}

void Module::to(DType dtype) {
  TG_CHECK(is_floating(dtype), "{}: to() takes a float dtype, got {}", type_name_, dtype);
  NoGradGuard no_grad;
  for (const Slot& s : parameters_) {
    *s.tensor = s.tensor->detach().to(dtype);
    s.tensor->set_requires_grad(true);
  }
  for (const Slot& s : buffers_) {
    if (is_floating(s.tensor->dtype())) *s.tensor = s.tensor->to(dtype);
  }
  for (auto& [name, child] : children_) child->to(dtype);
}

void Module::assign(std::string_view dotted_name, const Tensor& value) {
  const size_t dot = dotted_name.find('.');
  if (dot != std::string_view::npos) {
    const std::string_view head = dotted_name.substr(0, dot);
    for (auto& [name, child] : children_) {
      if (name == head) return child->assign(dotted_name.substr(dot + 1), value);
    }
  } else {
    for (const Slot& s : parameters_) {
      if (s.name == dotted_name) {
        *s.tensor = value.detach();
        s.tensor->set_requires_grad(true);
        return;
      }
    }
    for (const Slot& s : buffers_) {
      if (s.name == dotted_name) {
        *s.tensor = value.detach();
        return;
      }
    }
  }
  throw Error(fmt::format("{}: no parameter or buffer named '{}'", type_name_, dotted_name));
}

void Module::summarize(std::string& out, const std::string& name, int depth) const {
  const std::string indent(2 * depth, ' ');
  int64_t own = 0;
  NamedTensors params;
  collect("", true, false, params);
  for (const auto& [n, t] : params) own += t.numel();
  out += fmt::format("{}{}{}{} ({} parameters)\n", indent, name, name.empty() ? "" : ": ",
                     type_name_, own);
  for (const Slot& s : parameters_) {
    out += fmt::format("{}  {} {} {}\n", indent, s.name, s.tensor->shape(), s.tensor->dtype());
  }
  for (const Slot& s : buffers_) {
    out += fmt::format("{}  {} {} {} (buffer)\n", indent, s.name, s.tensor->shape(),
                       s.tensor->dtype());
  }
  for (const auto& [n, child] : children_) child->summarize(out, n, depth + 1);
}

std::string Module::summary() const {
  std::string out;
  summarize(out, "", 0);
  return out;
}

}  // namespace tapegrad::nn
