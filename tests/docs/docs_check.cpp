// Keeps the book's outputs true (docs/*.md): every output a page shows is produced by a program
// of the repo, and this check runs the program again and compares.
//
// A page marks a generated block with a comment on the line before it:
//   <!-- output: seeds/seed_003_encoder_stack -->     the next ``` block is the program's stdout
//   <!-- file: images/tape.svg by: tour --draw {dir} -->   docs/images/tape.svg is the file of
//                                                      that name the program writes into {dir}
//   <!-- source: tapegrad/autograd/ops/layernorm.cpp Tensor layer_norm_reference( -->
//                                 the next ``` block is the definition in that file (from the
//                                 root of the repository, DOCS_DIR/..) whose first line starts
//                                 with the text after the path, through its closing brace
// And every name a page gives in a code span outside its code blocks (`nn::generate`,
// `layer_norm_reference()`: one name, qualified or with an underscore, perhaps called) must occur
// in the repository's sources, so a chapter cannot go on naming a function that is gone.
// Programs are named relative to the examples' build directory. A quoted definition must match
// exactly. Text must match exactly, except
// numbers, which may differ by two units of the page's last printed digit (or 1e-7 relative, or
// 1e-9, where that is larger): the same float32 program on another CPU sums in another order.
// Runs of spaces count as one (a wider number shifts a column).
//
//   docs_check DOCS_DIR EXAMPLES_DIR [--update]      (--update rewrites the blocks and files)
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string line; std::getline(ss, line);) out.push_back(line);
  return out;
}

// The command's stdout; throws when it fails.
std::string run(const std::string& command) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) throw std::runtime_error("cannot run: " + command);
  std::string out;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
  const int status = pclose(pipe);
  if (status != 0) {
    throw std::runtime_error("'" + command + "' exited with status " +
                             std::to_string(WEXITSTATUS(status)) + ":\n" + out);
  }
  return out;
}

struct Number {
  double value;
  double unit;  // of the last printed digit: 1e-4 for "0.0068", 1e-18 for "1.4e-17"
};

Number parse(const std::string& text) {
  const size_t e = text.find_first_of("eE");
  const std::string mantissa = text.substr(0, e);
  const size_t dot = mantissa.find('.');
  const int decimals = dot == std::string::npos ? 0 : static_cast<int>(mantissa.size() - dot - 1);
  const int exponent = e == std::string::npos ? 0 : std::stoi(text.substr(e + 1));
  return {std::stod(text), std::pow(10.0, exponent - decimals)};
}

// The number starting at line[pos] (sign, digits, a point, an exponent), or 0 characters.
size_t number_length(const std::string& line, size_t pos) {
  auto digit = [&](size_t i) {
    return i < line.size() && std::isdigit(static_cast<unsigned char>(line[i]));
  };
  size_t i = pos;
  if (i < line.size() && (line[i] == '-' || line[i] == '+')) ++i;
  const size_t start = i;
  while (digit(i)) ++i;
  if (i < line.size() && line[i] == '.') {
    ++i;
    while (digit(i)) ++i;
  }
  if (i == start || (i == start + 1 && line[start] == '.')) return 0;  // no digit
  if (i < line.size() && (line[i] == 'e' || line[i] == 'E')) {
    size_t j = i + 1;
    if (j < line.size() && (line[j] == '-' || line[j] == '+')) ++j;
    if (digit(j)) {
      while (digit(j)) ++j;
      i = j;
    }
  }
  return i - pos;
}

// The line with each number replaced by '#' and runs of spaces collapsed, and its numbers.
// Digits inside a word ("float32", "t2", a colour "#fff3c4") are text.
std::pair<std::string, std::vector<Number>> split(const std::string& line) {
  std::string skeleton;
  std::vector<Number> numbers;
  for (size_t i = 0; i < line.size();) {
    const bool in_word = i > 0 && (std::isalnum(static_cast<unsigned char>(line[i - 1])) ||
                                   line[i - 1] == '_' || line[i - 1] == '#');
    const size_t n = in_word ? 0 : number_length(line, i);
    if (n > 0) {
      skeleton += '#';
      numbers.push_back(parse(line.substr(i, n)));
      i += n;
    } else if (line[i] == ' ' && !skeleton.empty() && skeleton.back() == ' ') {
      ++i;
    } else {
      skeleton += line[i++];
    }
  }
  return {skeleton, numbers};
}

// The text between `open` and `close` when the line is exactly "open ... close", else empty.
std::string between(const std::string& line, const std::string& open, const std::string& close) {
  if (line.size() < open.size() + close.size() || line.rfind(open, 0) != 0 ||
      line.compare(line.size() - close.size(), close.size(), close) != 0) {
    return "";
  }
  return line.substr(open.size(), line.size() - open.size() - close.size());
}

// Empty when `got` matches `want`; otherwise where and how they differ.
std::string compare(const std::string& want, const std::string& got) {
  const auto a = lines_of(want), b = lines_of(got);
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    const std::string wl = i < a.size() ? a[i] : "(no line)";
    const std::string gl = i < b.size() ? b[i] : "(no line)";
    const auto [ws, wn] = split(wl);
    const auto [gs, gn] = split(gl);
    bool same = ws == gs && wn.size() == gn.size();
    for (size_t k = 0; same && k < wn.size(); ++k) {
      const double tol = std::max({2 * wn[k].unit, 1e-7 * std::abs(wn[k].value), 1e-9});
      same = std::abs(wn[k].value - gn[k].value) <= tol;
    }
    if (!same) {
      return "line " + std::to_string(i + 1) + "\n  page:    " + wl + "\n  program: " + gl;
    }
  }
  return "";
}

// The ``` block after the marker at line i: its opening and closing lines.
std::pair<size_t, size_t> block_after(const std::vector<std::string>& lines, size_t i) {
  size_t open = i + 1, close = open + 1;
  while (close < lines.size() && lines[close].rfind("```", 0) != 0) ++close;
  if (open >= lines.size() || lines[open].rfind("```", 0) != 0 || close >= lines.size()) {
    throw std::runtime_error("no ``` block after the marker");
  }
  return {open, close};
}

// The definition in `file` whose first line starts with `head`, through the closing brace at
// the start of a line.
std::string definition(const fs::path& root, const std::string& file, const std::string& head) {
  const auto lines = lines_of(read(root / file));
  const auto first = std::find_if(lines.begin(), lines.end(),
                                  [&](const std::string& l) { return l.rfind(head, 0) == 0; });
  if (first == lines.end()) throw std::runtime_error(file + " has no line starting '" + head + "'");
  std::string text;
  for (auto it = first; it != lines.end(); ++it) {
    text += *it + "\n";
    if (*it == "}") return text;
  }
  throw std::runtime_error(file + ": '" + head + "' has no closing brace");
}

bool word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Whether text is one identifier: a letter or _, then letters, digits and _.
bool identifier(const std::string& text) {
  return !text.empty() && !std::isdigit(static_cast<unsigned char>(text[0])) &&
         std::all_of(text.begin(), text.end(), word_char);
}

// Every identifier in the sources under root (the folders a page may name code from).
std::set<std::string> identifiers(const fs::path& root) {
  static const std::set<std::string> kinds{".h", ".cpp", ".py", ".ipynb", ".sh", ".cmake", ".in"};
  std::set<std::string> out;
  const auto add = [&](const fs::path& file) {
    const std::string text = read(file);
    for (size_t i = 0, j; i < text.size(); i = j + 1) {
      for (j = i; j < text.size() && word_char(text[j]);) ++j;
      if (identifier(text.substr(i, j - i))) out.insert(text.substr(i, j - i));
    }
  };
  if (fs::exists(root / "CMakeLists.txt")) add(root / "CMakeLists.txt");
  for (const char* folder : {"tapegrad", "examples", "python", "tests", "bench", "notebooks",
                             "scripts", "fuzz", "cmake"}) {
    if (!fs::is_directory(root / folder)) continue;
    for (const auto& e : fs::recursive_directory_iterator(root / folder)) {
      if (e.is_regular_file() && (kinds.contains(e.path().extension().string()) ||
                                  e.path().filename() == "CMakeLists.txt")) {
        add(e.path());
      }
    }
  }
  return out;
}

// The last name of a code span that is one name, qualified or not, perhaps followed by a
// call's parentheses (`nn::generate`, `layer_norm_reference()`), when it is qualified, has an
// underscore inside it or is a type's name (`Walk`: a capital, then a small letter); "" for any
// other span (a flag, a path, a file, an expression, a word in capitals).
std::string named_function(const std::string& span) {
  const size_t open = span.find('(');
  if (open != std::string::npos && span.back() != ')') return "";
  const std::string head = span.substr(0, open);
  std::vector<std::string> parts;
  for (size_t i = 0, colons; i <= head.size(); i = colons + 2) {
    colons = std::min(head.find("::", i), head.size());
    parts.push_back(head.substr(i, colons - i));
  }
  if (!std::all_of(parts.begin(), parts.end(), identifier)) return "";
  const std::string& name = parts.back();
  const bool type = std::isupper(static_cast<unsigned char>(name[0])) && name.size() > 1 &&
                    std::islower(static_cast<unsigned char>(name[1]));
  return parts.size() > 1 || type || name.find('_', 1) != std::string::npos ? name : "";
}

// The names a page gives in its code spans outside code blocks, each with its line.
std::vector<std::pair<size_t, std::string>> named_functions(const std::vector<std::string>& lines) {
  std::vector<std::pair<size_t, std::string>> out;
  bool in_block = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind("```", 0) == 0) in_block = !in_block;
    if (in_block) continue;
    const std::string& line = lines[i];
    for (size_t a = line.find('`'), b; a != std::string::npos; a = line.find('`', b + 1)) {
      if ((b = line.find('`', a + 1)) == std::string::npos) break;
      if (const std::string name = named_function(line.substr(a + 1, b - a - 1)); !name.empty()) {
        out.emplace_back(i, name);
      }
    }
  }
  return out;
}

// The block after lines[i] against what its program printed or its source holds (`got`):
// rewritten with --update (returns true), else an error when they differ.
bool check_block(std::vector<std::string>& lines, size_t i, const std::string& got,
                 const std::string& output, const std::string& source, bool update) {
  const auto [open, close] = block_after(lines, i);
  std::string want;
  for (size_t k = open + 1; k < close; ++k) want += lines[k] + "\n";
  if (update) {
    lines.erase(lines.begin() + static_cast<long>(open + 1),
                lines.begin() + static_cast<long>(close));
    const auto fresh = lines_of(got);
    lines.insert(lines.begin() + static_cast<long>(open + 1), fresh.begin(), fresh.end());
    return true;
  }
  if (!source.empty() && want != got) {
    throw std::runtime_error("the quote of '" + source + "' differs from the source");
  }
  if (const std::string diff = compare(want, got); !diff.empty()) {
    throw std::runtime_error("the output of '" + output + "' differs, " + diff);
  }
  return false;
}

// A drawn file ("images/tape.svg by: tour --draw {dir}") against what its program writes into
// a fresh {dir}: rewritten with --update, else an error when they differ.
void check_file(const fs::path& docs, const fs::path& bin, const std::string& file, bool update) {
  const size_t by = file.find(" by: ");
  if (by == std::string::npos) throw std::runtime_error("a file marker without ' by: '");
  const fs::path target = docs / file.substr(0, by);
  const fs::path dir = fs::temp_directory_path() / ("docs_check_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::string command = file.substr(by + 5);
  const size_t slot = command.find("{dir}");
  if (slot != std::string::npos) command.replace(slot, 5, dir.string());
  run((bin / command).string());
  const std::string got = read(dir / target.filename());
  fs::remove_all(dir);
  if (update) {
    fs::create_directories(target.parent_path());
    std::ofstream(target, std::ios::binary) << got;
  } else if (const std::string diff = compare(read(target), got); !diff.empty()) {
    throw std::runtime_error(target.string() + " differs from what '" + command + "' writes, " +
                             diff);
  }
}

// How many of the names a page gives no source has, each reported; `names` counts them all.
int gone_names(const fs::path& page, const std::vector<std::string>& lines,
               const std::set<std::string>& known, int& names) {
  int gone = 0;
  for (const auto& [line, name] : named_functions(lines)) {
    ++names;
    if (known.contains(name)) continue;
    std::cerr << page.string() << ":" << line + 1 << ": names `" << name
              << "`, which no source of the repository has\n";
    ++gone;
  }
  return gone;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: docs_check DOCS_DIR EXAMPLES_DIR [--update]\n";
    return 2;
  }
  const fs::path docs = argv[1], bin = argv[2];
  const bool update = argc > 3 && std::string(argv[3]) == "--update";
  int failures = 0, checked = 0;
  std::vector<fs::path> pages;
  for (const auto& e : fs::directory_iterator(docs)) {
    if (e.path().extension() == ".md") pages.push_back(e.path());
  }
  std::sort(pages.begin(), pages.end());
  const std::set<std::string> known = identifiers(docs / "..");
  int names = 0;
  for (const fs::path& page : pages) {
    std::vector<std::string> lines = lines_of(read(page));
    bool changed = false;
    failures += gone_names(page, lines, known, names);
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::string output = between(lines[i], "<!-- output: ", " -->");
      const std::string file = between(lines[i], "<!-- file: ", " -->");
      const std::string source = between(lines[i], "<!-- source: ", " -->");
      try {
        if (!output.empty() || !source.empty()) {
          const size_t space = source.find(' ');
          const std::string got = output.empty() ? definition(docs / "..", source.substr(0, space),
                                                              source.substr(space + 1))
                                                 : run((bin / output).string());
          changed = check_block(lines, i, got, output, source, update) || changed;
          ++checked;
        } else if (!file.empty()) {
          check_file(docs, bin, file, update);
          ++checked;
        }
      } catch (const std::exception& e) {
        std::cerr << page.string() << ":" << i + 1 << ": " << e.what() << "\n";
        ++failures;
      }
    }
    if (changed) {
      std::ofstream out(page, std::ios::binary);
      for (const std::string& line : lines) out << line << "\n";
    }
  }
  std::cout << "docs_check: " << checked << " generated blocks and files checked"
            << (update ? " and rewritten" : "") << " and " << names << " names looked up, "
            << failures << " differ or are gone\n";
  return failures == 0 ? 0 : 1;
}
