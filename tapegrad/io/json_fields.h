// Reading a JSON object's fields strictly, for a file a user gives: every problem (a missing
// key, a wrong type, an unknown key) is gathered so that one error can name them all.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace tapegrad::io {

class JsonFields {
 public:
  explicit JsonFields(const nlohmann::json& j) : j_(j) {}

  void integer(const char* name, int64_t& out);
  void unsigned_integer(const char* name, uint64_t& out);
  void number(const char* name, double& out);
  void boolean(const char* name, bool& out);
  // A string among `names`: out is the enum value at its position.
  template <class Enum, size_t N>
  void choice(const char* name, Enum& out, const char* const (&names)[N]) {
    const auto* v = field(name);
    if (!v) return;
    const auto* it = v->is_string() ? std::find(names, names + N, *v) : names + N;
    if (it != names + N) {
      out = static_cast<Enum>(it - names);
    } else {
      problems_.push_back(
          fmt::format("'{}' must be one of \"{}\"", name, fmt::join(names, names + N, "\", \"")));
    }
  }
  // Every problem so far, and every key no reader asked for.
  std::vector<std::string> problems() const;

 private:
  const nlohmann::json* field(const char* name);

  const nlohmann::json& j_;
  std::vector<std::string> problems_;
  std::set<std::string> known_;
};

}  // namespace tapegrad::io
