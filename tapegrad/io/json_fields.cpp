// JsonFields: each reader checks its field's type and notes what is missing or wrong.
#include "tapegrad/io/json_fields.h"

namespace tapegrad::io {

void JsonFields::integer(const char* name, int64_t& out) {
  const auto* v = field(name);
  if (!v) return;
  if (v->is_number_integer() && !(v->is_number_unsigned() && v->get<uint64_t>() > INT64_MAX)) {
    out = v->get<int64_t>();
  } else {
    problems_.push_back(fmt::format("'{}' must be an integer, got {}", name,
                                    v->is_primitive() ? v->dump().substr(0, 40) : v->type_name()));
  }
}

void JsonFields::unsigned_integer(const char* name, uint64_t& out) {
  const auto* v = field(name);
  if (v && v->is_number_unsigned()) out = v->get<uint64_t>();
  if (v && !v->is_number_unsigned())
    problems_.push_back(fmt::format("'{}' must be a non-negative integer", name));
}

void JsonFields::number(const char* name, double& out) {
  const auto* v = field(name);
  if (v && v->is_number()) out = v->get<double>();
  if (v && !v->is_number()) problems_.push_back(fmt::format("'{}' must be a number", name));
}

void JsonFields::boolean(const char* name, bool& out) {
  const auto* v = field(name);
  if (v && v->is_boolean()) out = v->get<bool>();
  if (v && !v->is_boolean()) problems_.push_back(fmt::format("'{}' must be true or false", name));
}

std::vector<std::string> JsonFields::problems() const {
  std::vector<std::string> all = problems_;
  for (const auto& [key, value] : j_.items()) {
    if (!known_.contains(key)) all.push_back(fmt::format("unknown key '{}'", key.substr(0, 40)));
  }
  return all;
}

const nlohmann::json* JsonFields::field(const char* name) {
  known_.insert(name);
  const auto it = j_.find(name);
  if (it != j_.end()) return &*it;
  problems_.push_back(fmt::format("'{}' is missing", name));
  return nullptr;
}

}  // namespace tapegrad::io
