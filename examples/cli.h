// Command-line flags for the example programs: --name value or --name=value. Each flag is read
// with its default and help text; finish() rejects anything left over, and --help prints
// the collected help. Errors name the flag.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "tapegrad/autograd/bfloat16.h"

namespace tapegrad::examples {

class FlagError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Flags {
 public:
  Flags(int argc, char** argv, std::string usage);

  // A text; "" (--name "", or --name alone) is refused unless `may_be_empty`.
  std::string text(const std::string& name, const std::string& fallback, const std::string& help,
                   bool may_be_empty = false);
  // An integer in [min, max]; anything else (1e9, 4.5, nan, a word) is a FlagError.
  int64_t integer(const std::string& name, int64_t fallback, const std::string& help, int64_t min,
                  int64_t max);
  double real(const std::string& name, double fallback, const std::string& help, double min,
              double max);
  // Present or not, or --name=true / --name=false; `fallback` when not given.
  bool boolean(const std::string& name, const std::string& help, bool fallback = false);
  // Whether the command line named the flag (a fallback() value does not count).
  bool given(const std::string& name) const { return given_.contains(name); }
  // The flag's text as given, without reading it as a flag (no help entry).
  std::optional<std::string> peek(const std::string& name) const;
  // Values to use for flags the command line did not give (a resumed run's saved flags, a
  // --config file), read from `source`, which errors about them name. A boolean flag takes
  // "true" or "false"; "" is the value of a text flag whose default is none, and is refused
  // for any other flag, as on the command line. Call before reading the flags.
  void fallback(const std::map<std::string, std::string>& values, const std::string& source);
  // "--name", or "--name (saved in FILE)" for a value fallback() supplied: how an error names
  // the flag, so that a value read from a file is reported as coming from that file.
  std::string label(const std::string& name) const;
  // Each flag read so far, as canonical text: the value read, with defaults and fallbacks
  // ("0.002", "64"; a boolean "true" or "false").
  const std::map<std::string, std::string>& read() const { return read_; }
  // Arguments that are not flags, in order.
  const std::vector<std::string>& positional() const { return positional_; }
  // Arguments that are not flags are accepted (translate's sources); otherwise finish() refuses
  // them.
  void takes_arguments() { takes_arguments_ = true; }
  // Throws on unknown flags and on arguments the program does not take. Returns false when
  // --help was asked for (and prints it).
  bool finish();

 private:
  std::string usage_;
  std::map<std::string, std::string> values_;
  std::map<std::string, std::string> read_;
  std::set<std::string> given_;
  std::set<std::string> inline_;  // given as --name=value
  std::string fallback_source_;
  std::vector<std::string> positional_;
  std::vector<std::string> help_;
  std::vector<std::string> known_;
  bool takes_arguments_ = false;
};

// A flag file: one `name = value` a line (a flag's name without its dashes; a boolean flag takes
// true or false), blank lines and lines that start with # ignored, a value in double quotes
// read without them. train --config reads one, and a run folder keeps its flags in one.
// Throws FlagError naming the file and line.
std::map<std::string, std::string> read_flag_file(const std::string& path);
std::string flag_file_text(const std::map<std::string, std::string>& flags);

// `base`, or when something exists there the first of base-2, base-3, ... that does not: the
// default folder of a new run, so that a run is never written over.
std::string unused_folder(const std::string& base);

// --precision: fp32 (the default) or bf16, read alike by train, classify and bench.
Precision read_precision(Flags& f);

// Runs a program's body and turns its exceptions into "program: message" on stderr, with exit
// code 2 for flag errors and 1 for anything else.
int run_main(const char* program, const std::function<int()>& body);

}  // namespace tapegrad::examples
