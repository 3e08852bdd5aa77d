// The example programs' flags: parsing --name value, typed and bounded reads, fallbacks from a
// saved run, --help, and turning exceptions into exit codes.
#include "examples/cli.h"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <type_traits>

#include "tapegrad/io/files.h"

namespace tapegrad::examples {

Flags::Flags(int argc, char** argv, std::string usage) : usage_(std::move(usage)) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0 || arg == "--") {
      positional_.push_back(arg);
      continue;
    }
    arg = arg.substr(2);
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    if (eq != std::string::npos) {
      values_[name] = arg.substr(eq + 1);
      inline_.insert(name);  // the last one given counts, as with argparse
    } else if (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) {
      values_[name] = argv[++i];
      inline_.erase(name);
    } else {
      values_[name] = "";
      inline_.erase(name);
    }
  }
  for (const auto& [name, value] : values_) given_.insert(name);
}

std::optional<std::string> Flags::peek(const std::string& name) const {
  const auto it = values_.find(name);
  return it == values_.end() ? std::nullopt : std::optional<std::string>(it->second);
}

std::string Flags::label(const std::string& name) const {
  if (given(name) || !values_.contains(name)) return "--" + name;
  return fmt::format("--{} (saved in {})", name, fallback_source_);
}

void Flags::fallback(const std::map<std::string, std::string>& values, const std::string& source) {
  fallback_source_ = source;
  for (const auto& [name, value] : values) {
    if (given(name)) continue;
    values_[name] = value;
    inline_.insert(name);  // as --name=value gives it: a boolean's value is true or false
  }
}

std::string Flags::text(const std::string& name, const std::string& fallback,
                        const std::string& help, bool may_be_empty) {
  known_.push_back(name);
  help_.push_back(
      fmt::format("  --{:<18} {} (default: {})", name, help, fallback.empty() ? "none" : fallback));
  auto it = values_.find(name);
  // a saved "" is the unset value of a flag whose default is none
  const bool unset = it != values_.end() && !given(name) && fallback.empty();
  if (it != values_.end() && it->second.empty() && !unset && !may_be_empty)
    throw FlagError(fmt::format("{}: needs a value", label(name)));
  return read_[name] = it == values_.end() ? fallback : it->second;
}

namespace {
// The whole of `text` as a number of type T, or a FlagError naming the flag.
template <class T>
T parse_number(const std::string& label, const std::string& text, const char* kind) {
  size_t used = 0;
  T x{};
  try {
    if constexpr (std::is_same_v<T, double>) {
      x = std::stod(text, &used);
    } else {
      x = std::stoll(text, &used);
    }
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size()) {
    throw FlagError(fmt::format("{}: expected {}, got '{}'", label, kind, text));
  }
  return x;
}
}  // namespace

int64_t Flags::integer(const std::string& name, int64_t fallback, const std::string& help,
                       int64_t min, int64_t max) {
  const std::string given =
      text(name, std::to_string(fallback), fmt::format("{}; {} to {}", help, min, max));
  const auto x = parse_number<int64_t>(label(name), given, "an integer");
  if (x < min || x > max) {
    throw FlagError(fmt::format("{}: must be in [{}, {}], got {}", label(name), min, max, given));
  }
  read_[name] = std::to_string(x);
  return x;
}

double Flags::real(const std::string& name, double fallback, const std::string& help, double min,
                   double max) {
  const auto x =
      parse_number<double>(label(name), text(name, fmt::format("{}", fallback), help), "a number");
  if (!std::isfinite(x) || x < min || x > max) {
    throw FlagError(fmt::format("{}: must be in [{}, {}], got {}", label(name), min, max, x));
  }
  read_[name] = fmt::format("{}", x);
  return x;
}

bool Flags::boolean(const std::string& name, const std::string& help, bool fallback) {
  known_.push_back(name);
  help_.push_back(fmt::format("  --{:<18} {}{}", name, help,
                              fallback ? " (default: on; --" + name + "=false: off)" : ""));
  auto it = values_.find(name);
  bool on = fallback;
  if (it != values_.end() && inline_.contains(name)) {  // --name=true or --name=false
    if (it->second != "true" && it->second != "false") {
      throw FlagError(given(name)
                          ? fmt::format("{}: takes no value, or =true or =false", label(name))
                          : fmt::format("{}: expected true or false, got '{}'", label(name),
                                        it->second.substr(0, 40)));
    }
    on = it->second == "true";
  } else if (it != values_.end()) {
    // "--flag value" took the next argument: give it back as positional
    if (!it->second.empty()) positional_.insert(positional_.begin(), it->second);
    on = true;
  }
  read_[name] = on ? "true" : "false";
  return on;
}

bool Flags::finish() {
  if (values_.contains("help")) {
    fmt::print("{}\n\nflags:\n", usage_);
    for (const std::string& h : help_) fmt::print("{}\n", h);
    return false;
  }
  for (const auto& [name, value] : values_) {
    if (std::find(known_.begin(), known_.end(), name) == known_.end()) {
      std::vector<std::string> flags;
      for (const std::string& k : known_) flags.push_back("--" + k);
      throw FlagError(fmt::format("{}: unknown flag; the flags are {} (--help explains them)",
                                  label(name), fmt::join(flags, " ")));
    }
  }
  if (!takes_arguments_ && !positional_.empty()) {
    throw FlagError(
        fmt::format("unexpected argument '{}': this program takes flags only (see "
                    "--help)",
                    positional_[0].substr(0, 80)));
  }
  return true;
}

std::map<std::string, std::string> read_flag_file(const std::string& path) {
  std::string text;
  try {
    text = io::read_regular(path, 1 << 20);
  } catch (const io::FileError& e) {
    throw FlagError(e.what());
  }
  std::map<std::string, std::string> flags;
  size_t line_no = 0;
  for (size_t start = 0; start < text.size(); ++line_no) {
    const size_t end = std::min(text.find('\n', start), text.size());
    std::string line = text.substr(start, end - start);
    start = end + 1;
    const auto where = [&] { return fmt::format("{}:{}", path, line_no + 1); };
    const size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    const size_t eq = line.find('=');
    const auto trim = [](std::string t) {
      t.erase(0, std::min(t.size(), t.find_first_not_of(" \t\r")));
      t.erase(t.find_last_not_of(" \t\r") + 1);
      return t;
    };
    const std::string name = eq == std::string::npos ? "" : trim(line.substr(0, eq));
    std::string value = eq == std::string::npos ? "" : trim(line.substr(eq + 1));
    if (name.empty() ||
        name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != std::string::npos)
      throw FlagError(
          fmt::format("{}: expected 'name = value', got '{}'", where(), line.substr(0, 60)));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"')
      value = value.substr(1, value.size() - 2);
    if (!flags.emplace(name, value).second)
      throw FlagError(fmt::format("{}: '{}' given twice", where(), name));
  }
  return flags;
}

std::string flag_file_text(const std::map<std::string, std::string>& flags) {
  std::string text;
  for (const auto& [name, value] : flags) {
    const bool quote = value.empty() || value.find_first_of(" \t#\"") != std::string::npos;
    text += fmt::format("{} = {}\n", name, quote ? "\"" + value + "\"" : value);
  }
  return text;
}

std::string unused_folder(const std::string& base) {
  if (!std::filesystem::exists(std::filesystem::symlink_status(base))) return base;
  std::string next;
  for (int n = 2; next.empty() || std::filesystem::exists(std::filesystem::symlink_status(next));
       ++n)
    next = fmt::format("{}-{}", base, n);
  return next;
}

Precision read_precision(Flags& f) {
  const std::string precision =
      f.text("precision", "fp32",
             "the model's matrix products: fp32, or bf16 (mixed precision: bfloat16 operands "
             "summed in float32; the weights and the optimizer stay float32)");
  if (precision != "fp32" && precision != "bf16")
    throw FlagError(fmt::format("{}: fp32 or bf16, got '{}'", f.label("precision"), precision));
  return precision == "bf16" ? Precision::BFloat16 : Precision::Float32;
}

int run_main(const char* program, const std::function<int()>& body) {
  try {
    return body();
  } catch (const FlagError& e) {
    fmt::print(stderr, "{}: {}\n", program, e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}: {}\n", program, e.what());
    return 1;
  }
}

}  // namespace tapegrad::examples
