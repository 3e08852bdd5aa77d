// The run directory (layout and commit protocol in run.h): locking and cleaning it, committing
// checkpoints atomically, and reading them back with every part checked against the others.
#include "tapegrad/train/run.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "tapegrad/data/data_error.h"
#include "tapegrad/data/text.h"
#include "tapegrad/io/files.h"
#include "tapegrad/nn/layers.h"
#include "tapegrad/pretrained/causal_lm.h"

namespace tapegrad::train {

namespace fs = std::filesystem;

namespace {

constexpr const char* kMarker = ".tapegrad-run";
constexpr const char* kLatest = "latest";
constexpr const char* kBest = "best";
constexpr const char* kCheckpoints = "checkpoints";
}  // namespace

bool is_run_file(std::string_view name) {
  static const std::set<std::string, std::less<>> names = {
      "train.tsv",   "valid.tsv",  "test.tsv",    "train.txt", "valid.txt",
      "loss.tsv",    "eval.tsv",   "samples.tsv", "loss.svg",  "scores.svg",
      "report.html", "flags.conf", kLatest,       kBest,       kCheckpoints};
  return names.contains(name) || (name.starts_with("attention_") && name.ends_with(".svg"));
}

std::string run_file(const std::string& dir, std::string_view name) {
  TG_ASSERT(is_run_file(name));
  return fmt::format("{}/{}", dir, name);
}

namespace {

constexpr uint64_t kMaxSmallFile = 1 << 20;  // trainer.json, latest: far larger than they get

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw RunError(fmt::format("{}: {}", where, what));
}

std::string step_name(int64_t step) { return fmt::format("step-{:08d}", step); }

// The step of a "step-00000300" name, or -1 for any other name.
int64_t step_of(const std::string& name) {
  if (name.size() != 13 || name.rfind("step-", 0) != 0) return -1;
  if (!std::all_of(name.begin() + 5, name.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return -1;
  return std::stoll(name.substr(5));
}

// A file of the run, whole; its errors as RunError.
std::string read_whole(const std::string& path, uint64_t max_bytes = kMaxSmallFile) {
  try {
    return io::read_regular(path, max_bytes);
  } catch (const io::FileError& e) {
    throw RunError(e.what());
  }
}

// The run's data split: train.tsv and valid.tsv, or a language model's train.txt and valid.txt.
std::array<const char*, 2> split_files(const std::string& dir) {
  return fs::exists(fs::symlink_status(dir + "/train.txt")) ? std::array{"train.txt", "valid.txt"}
                                                            : std::array{"train.tsv", "valid.tsv"};
}

// 64-bit FNV-1a over the run's data split, as hex: a resume reads the split back and must find
// the one its checkpoints were trained on.
std::string data_digest(const std::string& dir) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char* name : split_files(dir)) {
    const std::string path = dir + "/" + name;
    try {
      io::OpenedFile f = io::open_regular(path, uint64_t{1} << 40);
      std::vector<char> chunk(1 << 16);
      while (f.stream.read(chunk.data(), static_cast<std::streamsize>(chunk.size())) ||
             f.stream.gcount() > 0) {
        for (std::streamsize i = 0; i < f.stream.gcount(); ++i)
          h = (h ^ static_cast<unsigned char>(chunk[i])) * 0x100000001b3ull;
      }
    } catch (const io::FileError& e) {
      throw RunError(e.what());
    }
    h = (h ^ 0xff) * 0x100000001b3ull;  // the boundary between the files
  }
  return fmt::format("{:016x}", h);
}

// The checkpoint name a pointer file (DIR/latest, DIR/best) holds, or "" when there is none yet.
std::string pointer_name(const std::string& dir, const char* pointer) {
  const std::string path = dir + "/" + pointer;
  if (!fs::exists(fs::symlink_status(path))) return "";
  std::string name = read_whole(path);
  if (!name.empty() && name.back() == '\n') name.pop_back();
  if (step_of(name) < 0)
    fail(path, fmt::format("expected a name like step-00000300, got '{}'", name.substr(0, 40)));
  return name;
}
std::string latest_name(const std::string& dir) { return pointer_name(dir, kLatest); }

std::string encode_state(const std::array<uint64_t, 4>& s) {
  return fmt::format("{} {} {} {}", s[0], s[1], s[2], s[3]);
}

// Four unsigned decimal integers, not all zero, separated by single spaces.
std::array<uint64_t, 4> decode_state(const std::string& text, const std::string& where) {
  std::array<uint64_t, 4> s{};
  const char* at = text.data();
  const char* end = text.data() + text.size();
  bool ok = true;
  for (size_t i = 0; ok && i < s.size(); ++i) {
    if (i > 0) ok = at < end && *at++ == ' ';
    const auto [ptr, ec] = std::from_chars(at, end, s[i]);
    ok = ok && ec == std::errc{} && ptr != at;
    at = ptr;
  }
  if (!ok || at != end || s == std::array<uint64_t, 4>{})
    fail(where, "expected four unsigned integers, not all zero");
  return s;
}

// Removes `path` (a file or a whole folder), reporting failure as a RunError.
void remove_path(const fs::path& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) fail(path.string(), fmt::format("cannot remove: {}", ec.message()));
}

}  // namespace

std::string latest_checkpoint(const std::string& dir) {
  if (!fs::exists(fs::symlink_status(dir))) fail(dir, "no such folder, so no run to read");
  if (!fs::is_directory(dir)) fail(dir, "not a directory");
  const std::string name = latest_name(dir);
  if (name.empty()) {
    fail(dir,
         "no complete checkpoint (no 'latest' file): the run has not saved one yet; train "
         "without --resume starts it");
  }
  const std::string path = dir + "/" + kCheckpoints + "/" + name;
  if (!fs::is_directory(path))
    fail(dir + "/" + kLatest, fmt::format("names {}, which is missing", path));
  return path;
}

std::string checkpoint_folder(const std::string& dir, const std::string& checkpoint) {
  const bool folder = fs::exists(dir + "/config.json") && !fs::exists(dir + "/" + kLatest);
  if (folder) {
    if (checkpoint != "latest" && checkpoint != "best")
      fail(dir,
           fmt::format("a checkpoint folder itself, so it has no checkpoint '{}'", checkpoint));
    return dir;
  }
  if (checkpoint == "best") {  // as the latest checkpoint's trainer.json has it
    const std::string latest = latest_checkpoint(dir);
    const int64_t best = read_trainer_state(latest).best.step;
    if (best == 0) return latest;  // the run has not validated yet
    const std::string path = fmt::format("{}/{}/{}", dir, kCheckpoints, step_name(best));
    if (!fs::is_directory(fs::symlink_status(path)))
      fail(latest + "/trainer.json",
           fmt::format("names step {} the best, whose {} is missing", best, path));
    return path;
  }
  if (checkpoint == "latest") return latest_checkpoint(dir);
  const bool digits = !checkpoint.empty() && checkpoint.size() <= 8 &&
                      checkpoint.find_first_not_of("0123456789") == std::string::npos;
  if (!digits)
    fail(fmt::format("checkpoint '{}'", checkpoint.substr(0, 40)),
         "expected best, latest or a step number");
  const std::string path =
      fmt::format("{}/{}/{}", dir, kCheckpoints, step_name(std::stoll(checkpoint)));
  if (!fs::is_directory(fs::symlink_status(path))) {
    std::vector<std::string> steps;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir + "/" + kCheckpoints, ec)) {
      if (const int64_t step = step_of(e.path().filename().string()); step >= 0)
        steps.push_back(std::to_string(step));
    }
    std::sort(steps.begin(), steps.end(), [](const std::string& a, const std::string& b) {
      return std::stoll(a) < std::stoll(b);
    });
    fail(dir, fmt::format("no checkpoint of step {}; it keeps {}", checkpoint,
                          steps.empty() ? "none" : fmt::format("{}", fmt::join(steps, ", "))));
  }
  return path;
}

LoadedModel load_run(const std::string& dir, const std::string& checkpoint) {
  LoadedModel run;
  run.checkpoint = checkpoint_folder(dir, checkpoint);
  if (is_language_model(run.checkpoint)) {
    fail(run.checkpoint,
         "holds a language model (train --task lm): examples/sample continues "
         "its text");
  }
  Pretrained p = load_pretrained(run.checkpoint);
  run.step = metadata_step(p.metadata, run.checkpoint + "/model.safetensors");
  run.model = std::move(p.model);
  run.src_vocab = std::move(p.src_vocab);
  run.tgt_vocab = std::move(p.tgt_vocab);
  return run;
}

int64_t DecodeLimits::of(size_t source_tokens) const {
  return std::min(options.max_len,
                  static_cast<int64_t>(factor * static_cast<double>(source_tokens)) + 10);
}

std::vector<std::vector<int64_t>> decode(LoadedModel& run,
                                         const std::vector<std::vector<int64_t>>& ids,
                                         const std::vector<size_t>& members,
                                         const DecodeLimits& limits) {
  std::map<int64_t, std::vector<size_t>> groups;  // by limit (one group unless beam search)
  for (size_t m = 0; m < members.size(); ++m)
    groups[limits.options.beam > 1 ? limits.of(ids[members[m]].size()) : 0].push_back(m);
  std::vector<std::vector<int64_t>> out(members.size());
  for (const auto& [limit, group] : groups) {
    size_t S = 0;
    int64_t longest = 0;
    for (size_t m : group) {
      S = std::max(S, ids[members[m]].size());
      longest = std::max(longest, limits.of(ids[members[m]].size()));
    }
    std::vector<int64_t> padded(group.size() * S, run.model->config().pad_id);
    for (size_t g = 0; g < group.size(); ++g)
      std::copy(ids[members[group[g]]].begin(), ids[members[group[g]]].end(),
                padded.begin() + static_cast<std::ptrdiff_t>(g * S));
    nn::GenerateOptions options = limits.options;
    options.max_len = longest;
    const auto decoded = nn::generate(
        *run.model,
        from_vector(padded, {static_cast<int64_t>(group.size()), static_cast<int64_t>(S)}),
        options);
    for (size_t g = 0; g < group.size(); ++g) {
      std::vector<int64_t> tokens = decoded[g].tokens;
      const auto cap = static_cast<size_t>(limits.of(ids[members[group[g]]].size()));
      if (tokens.size() > cap) tokens.resize(cap);
      out[group[g]] = std::move(tokens);
    }
  }
  return out;
}

int64_t metadata_step(const nn::Metadata& metadata, const std::string& weights) {
  const auto step = metadata.find("step");
  if (step == metadata.end()) fail(weights, "the metadata needs 'step'");
  try {
    size_t used = 0;
    const int64_t value = std::stoll(step->second, &used);
    if (used == step->second.size()) return value;
  } catch (const std::exception&) {
  }
  fail(weights, "metadata 'step' is not an integer");
}

namespace {

constexpr uint64_t kMaxLog = uint64_t{1} << 30;  // 10M steps of about 40 bytes

// The step a line of a run's log begins with, or -1 when it begins with none.
int64_t line_step(std::string_view line) {
  int64_t step = -1;
  const auto [ptr, ec] = std::from_chars(line.data(), line.data() + line.size(), step);
  const bool ended = ptr == line.data() + line.size() || *ptr == '\t';
  return ec == std::errc{} && ptr != line.data() && ended ? step : -1;
}

// That the first `logged` bytes of the log at `path` are its lines of the steps up to `step`:
// whole lines, none of a later step, the last of `step` itself when the log has a line for
// every step, and no line of a step up to `step` after them.
void check_logged(const std::string& path, std::string_view text, uint64_t logged, int64_t step,
                  bool every_step, const std::string& source) {
  const std::string length = fmt::format("{} {}", source, logged);
  if (logged > 0 && text[logged - 1] != '\n')
    fail(path, fmt::format("{} ends inside a line", length));
  int64_t last = 0;
  for (size_t at = 0; at < logged;) {
    const size_t end = text.find('\n', at);
    last = line_step(text.substr(at, end - at));
    const auto where = [&] {
      return fmt::format("{}:{}", path, std::count(text.begin(), text.begin() + at, '\n') + 1);
    };
    if (last < 0) fail(where(), "expected a line that begins with its step");
    if (last > step) {
      fail(where(), fmt::format("{} takes in this line, of step {}, past the checkpoint's {}",
                                length, last, step));
    }
    at = end + 1;
  }
  if (every_step && last != step) {
    fail(path, fmt::format("{} ends the log at step {}, not at the checkpoint's step {}", length,
                           last, step));
  }
  const size_t next = text.find('\n', logged);
  if (next == std::string::npos) return;
  if (const int64_t after = line_step(text.substr(logged, next - logged));
      after >= 0 && after <= step)
    fail(path, fmt::format("{} leaves out the line of step {}, up to the checkpoint's step {}",
                           length, after, step));
}

}  // namespace

std::unique_ptr<io::AppendFile> open_log(const std::string& path, bool resume, int64_t logged,
                                         int64_t step, bool every_step, const std::string& source) {
  try {
    const bool fresh = !resume || (logged < 0 && !fs::exists(fs::symlink_status(path)));
    auto log = std::make_unique<io::AppendFile>(
        path, fresh ? io::AppendFile::Mode::Create : io::AppendFile::Mode::Existing);
    if (logged < 0) return log;
    if (log->size() < static_cast<uint64_t>(logged)) {
      fail(path, fmt::format("shorter than the {} bytes the checkpoint of step {} logged; it was "
                             "changed or truncated",
                             logged, step));
    }
    check_logged(path, io::read_regular(path, kMaxLog), static_cast<uint64_t>(logged), step,
                 every_step, source);
    log->truncate(static_cast<uint64_t>(logged));
    return log;
  } catch (const io::FileError& e) {
    throw RunError(e.what());
  }
}

namespace {
// Calls row(values, last) for each line of a run's log (loss.tsv, eval.tsv): `columns`
// tab-separated numbers, the first a step (nan and inf read as such), `last` for the final
// line. A line of another shape is a RunError naming the file, the line and `what` it expects.
template <class Row>
void read_log(const std::string& path, size_t columns, size_t optional, const char* what,
              Row&& row) {
  const std::string text = read_whole(path, kMaxLog);
  std::vector<double> values(columns + optional);
  int64_t line_no = 0;
  for (size_t at = 0; at < text.size();) {
    const size_t end = std::min(text.find('\n', at), text.size());
    const std::string_view line = std::string_view(text).substr(at, end - at);
    at = end + 1;
    ++line_no;
    size_t b = 0, n = 0;
    bool ok = true;
    std::fill(values.begin(), values.end(), std::nan(""));
    for (; ok && b <= line.size() && n < columns + optional; ++n) {
      const size_t e = std::min(line.find('\t', b), line.size());
      const std::string field(line.substr(b, e - b));
      size_t used = 0;
      try {
        values[n] = std::stod(field, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      ok = !field.empty() && used == field.size();
      b = e + 1;
    }
    if (!ok || (n != columns && n != columns + optional) || b <= line.size() ||
        values[0] != std::floor(values[0]))
      fail(fmt::format("{}:{}", path, line_no), what);
    row(values, at >= text.size());
  }
}
}  // namespace

EvalCurves read_eval_curves(const std::string& path) {
  EvalCurves curves;
  read_log(path, 4, 2,
           "expected step, loss, token accuracy and exact match, then BLEU and chrF, "
           "tab-separated",
           [&](const std::vector<double>& v, bool) {
             const auto step = static_cast<int64_t>(v[0]);
             curves.loss.push_back({step, v[1]});
             if (std::isnan(v[4])) return;  // a line from before the scores were logged
             curves.bleu.push_back({step, v[4]});
             curves.chrf.push_back({step, v[5]});
           });
  return curves;
}

std::vector<viz::CurvePoint> read_text_eval_curve(const std::string& path) {
  std::vector<viz::CurvePoint> curve;
  read_log(path, 3, 0, "expected step, loss and bits per character, tab-separated",
           [&](const std::vector<double>& v, bool) {
             curve.push_back({static_cast<int64_t>(v[0]), v[1]});
           });
  return curve;
}

void check_best(const BestValidation& best, const std::vector<viz::CurvePoint>& validations,
                const std::string& source, const std::string& log) {
  if (best.step == 0) return;
  const auto at = std::find_if(validations.begin(), validations.end(),
                               [&](const viz::CurvePoint& v) { return v.step == best.step; });
  if (at == validations.end())
    fail(source, fmt::format("'best.step' {} is not a step {} validated at", best.step, log));
  if (const auto after = validations.end() - at - 1; best.since != after) {
    fail(source, fmt::format("'best.since' {} disagrees with {}: {} validations after step {}",
                             best.since, log, after, best.step));
  }
}

std::string sample_line(int64_t step, std::string_view text) {
  return fmt::format("{}\t{}\n", step, data::escape_line(text));
}

std::vector<LoggedSample> read_samples(const std::string& path) {
  constexpr uint64_t kMaxSamples = uint64_t{1} << 30;
  const std::string text = read_whole(path, kMaxSamples);
  std::vector<LoggedSample> samples;
  int64_t line_no = 0;
  for (size_t at = 0, end; (end = text.find('\n', at)) != std::string::npos; at = end + 1) {
    const std::string_view line = std::string_view(text).substr(at, end - at);
    const std::string where = fmt::format("{}:{}", path, ++line_no);
    const size_t tab = line.find('\t');
    LoggedSample sample{.end = static_cast<int64_t>(end + 1)};
    const char* digits_end = line.data() + (tab == std::string_view::npos ? 0 : tab);
    const auto [ptr, ec] = std::from_chars(line.data(), digits_end, sample.step);
    if (tab == std::string_view::npos || ec != std::errc{} || ptr != digits_end || sample.step < 0)
      fail(where, "expected a step, a tab and the sample's text");
    std::optional<std::string> text_of = data::unescape_line(line.substr(tab + 1));
    if (!text_of) fail(where, "a backslash must begin \\\\, \\t or \\n");
    sample.text = std::move(*text_of);
    samples.push_back(std::move(sample));
  }
  return samples;
}

std::unique_ptr<io::AppendFile> open_samples_log(const std::string& path, bool resume,
                                                 int64_t step) {
  int64_t logged = -1;
  if (resume && fs::exists(fs::symlink_status(path))) {
    logged = 0;
    for (const LoggedSample& s : read_samples(path)) {
      if (s.step > step) break;
      logged = s.end;
    }
  }
  return open_log(path, resume, logged, step);
}

std::vector<viz::CurvePoint> read_loss_curve(const std::string& path) {
  std::vector<viz::CurvePoint> curve;
  double smoothed = 0;
  bool first = true;
  read_log(path, 3, 0, "expected step, loss and learning rate, tab-separated",
           [&](const std::vector<double>& v, bool last) {
             const auto step = static_cast<int64_t>(v[0]);
             smoothed = first ? v[1] : 0.95 * smoothed + 0.05 * v[1];
             first = false;
             if (step % 10 == 0 || last) curve.push_back({step, smoothed});
           });
  return curve;
}

namespace {

// A non-negative integer at `key` of `object`, named in errors as `name`.
int64_t count_at(const nlohmann::json& object, const char* key, const std::string& path,
                 const std::string& name) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_number_integer() || it->get<int64_t>() < 0)
    fail(path, fmt::format("'{}' must be a non-negative integer", name));
  return it->get<int64_t>();
}

// trainer.json's "best" (absent in runs saved before it) of a checkpoint at `step`.
BestValidation read_best(const nlohmann::json& best, const std::string& path, int64_t step) {
  if (!best.is_object()) fail(path, "'best' must be an object");
  for (const auto& [key, value] : best.items()) {
    if (key != "step" && key != "since" && key != "value")
      fail(path, fmt::format("unknown key 'best.{}'", key.substr(0, 40)));
  }
  BestValidation b;
  b.step = count_at(best, "step", path, "best.step");
  b.since = count_at(best, "since", path, "best.since");
  const auto value = best.find("value");
  if (value == best.end() || !value->is_number() || !std::isfinite(value->get<double>()))
    fail(path, "'best.value' must be a finite number");
  b.value = value->get<double>();
  if (b.step == 0 || b.step > step)
    fail(path, fmt::format("'best.step' {} is not a step from 1 to 'step' {}", b.step, step));
  return b;
}

}  // namespace

TrainerState read_trainer_state(const std::string& checkpoint_dir) {
  const std::string path = checkpoint_dir + "/trainer.json";
  const std::string text = read_whole(path);
  if (io::json_depth(text) > io::kMaxJsonDepth) {
    fail(path, fmt::format("nests deeper than {} levels", io::kMaxJsonDepth));
  }
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) fail(path, "not a JSON object");
  static const std::set<std::string> keys = {"step",           "epoch_index", "loss_log_bytes",
                                             "eval_log_bytes", "generators",  "flags",
                                             "data",           "best"};
  for (const auto& [key, value] : j.items()) {
    if (!keys.contains(key)) fail(path, fmt::format("unknown key '{}'", key.substr(0, 40)));
  }
  TrainerState s;
  auto integer = [&](const char* key, int64_t& out) { out = count_at(j, key, path, key); };
  auto strings = [&](const char* key, std::map<std::string, std::string>& out) {
    const auto it = j.find(key);
    if (it == j.end() || !it->is_object()) fail(path, fmt::format("'{}' must be an object", key));
    for (const auto& [k, v] : it->items()) {
      if (!v.is_string()) fail(path, fmt::format("'{}.{}' must be a string", key, k.substr(0, 40)));
      out[k] = v.get<std::string>();
    }
  };
  auto optional_text = [&](const char* key, std::string& out) {
    const auto it = j.find(key);
    if (it == j.end()) return;
    if (!it->is_string() || it->get<std::string>().empty() || it->get<std::string>().size() > 64)
      fail(path, fmt::format("'{}' must be a short text", key));
    out = it->get<std::string>();
  };
  integer("step", s.step);
  integer("epoch_index", s.epoch_index);
  integer("loss_log_bytes", s.loss_log_bytes);
  if (j.contains("eval_log_bytes")) integer("eval_log_bytes", s.eval_log_bytes);
  strings("generators", s.generators);
  strings("flags", s.flags);
  optional_text("data", s.data);
  if (const auto it = j.find("best"); it != j.end()) s.best = read_best(*it, path, s.step);
  for (const auto& [name, text] : s.generators)
    decode_state(text, path + ": generator '" + name + "'");
  return s;
}

namespace {

// Whether DIR carries train's marker; a link or special file in its place is an error.
bool is_marked(const std::string& dir) {
  const std::string path = dir + "/" + kMarker;
  const fs::file_status st = fs::symlink_status(path);
  if (!fs::exists(st)) return false;
  if (!fs::is_regular_file(st)) fail(path, "is not the file train writes (a link or special file)");
  return true;
}

// Opens and locks DIR/.lock (a second train on DIR is refused); the descriptor holds the lock.
int lock_run(const std::string& dir) {
  const std::string path = dir + "/.lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0) fail(path, fmt::format("cannot open: {}", std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, "is not a regular file");
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    fail(dir, "another train process is writing this run");
  }
  return fd;
}

// DIR without a trailing slash, so that its name and parent are its own.
fs::path normal(const std::string& dir) {
  fs::path p = fs::path(dir).lexically_normal();
  return p.has_filename() ? p : p.parent_path();
}

// The sibling folder a --replace of DIR builds its run in, before the exchange.
std::string staging_prefix(const fs::path& dir) {
  return fmt::format(".{}.replace.", dir.filename().string());
}

// Whether a folder with a staging name is train's: it carries the marker, or holds nothing but
// what train puts in first (the lock, temporaries), as a replace killed while making the folder
// or while removing the old run leaves it.
bool is_trains(const fs::path& folder) {
  if (is_marked(folder.string())) return true;
  for (const auto& entry : fs::directory_iterator(folder)) {
    const std::string name = entry.path().filename().string();
    if (name != ".lock" && !io::is_temporary_name(name)) return false;
  }
  return true;
}

// Removes a run folder with its marker and lock last, so that a removal cut short leaves a
// folder is_trains still recognises.
void remove_run(const fs::path& folder) {
  std::vector<fs::path> entries;
  for (const auto& entry : fs::directory_iterator(folder)) {
    const std::string name = entry.path().filename().string();
    if (name != kMarker && name != ".lock") entries.push_back(entry.path());
  }
  for (const fs::path& p : entries) remove_path(p);
  remove_path(folder);
}

// Staging folders of DIR that a killed --replace left (its new run before the exchange, or the
// old run after it), when nobody holds their lock.
void remove_stale_replacements(const fs::path& dir) {
  const fs::path parent = dir.has_parent_path() ? dir.parent_path() : fs::path(".");
  if (!fs::is_directory(parent)) return;
  for (const auto& entry : fs::directory_iterator(parent)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(staging_prefix(dir), 0) != 0 || entry.is_symlink() || !entry.is_directory())
      continue;
    int fd = -1;
    try {
      if (!is_trains(entry.path())) continue;
      fd = lock_run(entry.path().string());
    } catch (const RunError&) {
      continue;  // not train's, or a live process's
    }
    remove_run(entry.path());
    ::close(fd);
  }
}

}  // namespace

void claim_output_folder(const std::string& dir, const std::vector<std::string>& names) {
  const std::string marker = dir + "/.tapegrad-output";
  if (fs::exists(fs::symlink_status(dir)) && !fs::is_directory(dir)) fail(dir, "not a directory");
  if (fs::exists(fs::symlink_status(marker))) {
    if (!fs::is_regular_file(fs::symlink_status(marker)))
      fail(marker, "is not the file tapegrad writes (a link or special file)");
    return;
  }
  for (const std::string& name : names) {
    if (fs::exists(fs::symlink_status(dir + "/" + name))) {
      fail(dir + "/" + name, "exists and was not written by this program; choose another folder");
    }
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail(dir, fmt::format("cannot create: {}", ec.message()));
  try {
    io::write_atomic(marker, "written by a tapegrad program\n");
  } catch (const io::FileError& e) {
    throw RunError(e.what());
  }
}

std::string describe_run(const std::string& dir) {
  if (!fs::is_directory(dir) || !is_marked(dir)) return "";
  const std::string name = latest_name(dir);
  return name.empty() ? "a run with no checkpoint yet"
                      : fmt::format("a run at step {}", step_of(name));
}

RunDirectory::RunDirectory(const std::string& dir, Start start,
                           const std::vector<std::string>& inputs, int64_t keep)
    : keep_(keep) {
  if (keep < 1) fail(dir, fmt::format("keeping {} checkpoints: at least 1 must be kept", keep));
  if (fs::exists(fs::symlink_status(dir)) && !fs::is_directory(dir)) fail(dir, "not a directory");
  const fs::path root = fs::weakly_canonical(dir);
  for (const std::string& input : inputs) {
    const fs::path p = fs::weakly_canonical(input);
    const auto [end, _] = std::mismatch(root.begin(), root.end(), p.begin(), p.end());
    if (end == root.end()) {
      fail(input, fmt::format("lies inside --out {}, where train writes its own files; choose "
                              "another --out",
                              dir));
    }
  }
  const bool marked = fs::is_directory(dir) && is_marked(dir);
  if (fs::is_directory(dir) && !marked) {
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (is_run_file(entry.path().filename().string())) {
        fail(entry.path().string(), "exists and was not written by train; choose another --out");
      }
    }
  }
  const fs::path name = normal(dir);
  remove_stale_replacements(name);
  if (start == Start::New && marked) {
    fail(dir, fmt::format("holds {}: --resume continues it, --replace starts a new run in its "
                          "place (the old one is kept until the new one saves its first "
                          "checkpoint), or choose another --out",
                          describe_run(dir)));
  }
  if (start == Start::Resume && !marked) fail(dir, "holds no run to resume");
  if (start != Start::Replace || !marked) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) fail(dir, fmt::format("cannot create: {}", ec.message()));
    take(dir, marked);
    return;
  }
  if (name.filename() == "." || name.filename() == "..") {
    fail(dir, "--replace needs the run folder by its name, not '.' or '..'");
  }
  old_lock_fd_ = lock_run(dir);
  const fs::path staging = name.parent_path() / (staging_prefix(name) + std::to_string(::getpid()));
  remove_path(staging);  // a leftover of an earlier process with this pid
  if (::mkdir(staging.c_str(), 0755) != 0) {
    const std::string why = std::strerror(errno);
    ::close(old_lock_fd_);
    fail(staging.string(), fmt::format("cannot create: {}", why));
  }
  replaces_ = dir;
  take(staging.string(), false);
}

void RunDirectory::take(const std::string& dir, bool marked) {
  dir_ = dir;
  lock_fd_ = lock_run(dir);
  if (!marked) io::write_atomic(dir + "/" + kMarker, "a tapegrad run directory\n");

  // what a killed process left: temporaries, and checkpoints newer than `latest`; every file
  // train will write must be one it can replace (not a link, nor a special file)
  const std::string latest = latest_name(dir);
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (io::is_temporary_name(name)) {
      remove_path(entry.path());
    } else if (is_run_file(name) && name != kCheckpoints) {
      try {
        io::check_writable(entry.path().string());
      } catch (const io::FileError& e) {
        throw RunError(e.what());
      }
    }
  }
  const std::string folder = file(kCheckpoints);
  const fs::file_status st = fs::symlink_status(folder);
  if (fs::exists(st) && !fs::is_directory(st))
    fail(folder, "is not the folder train makes (a link or a file); refusing to write in it");
  if (fs::is_directory(st)) {
    for (const auto& entry : fs::directory_iterator(folder)) {
      const std::string name = entry.path().filename().string();
      if (io::is_temporary_name(name) || (step_of(name) >= 0 && name > latest)) {
        remove_path(entry.path());
      }
    }
  }
  fs::create_directories(folder);
}

RunDirectory::~RunDirectory() {
  if (!replaces_.empty()) {  // the new run never committed: the old one stays as it was
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the lock
  if (old_lock_fd_ >= 0) ::close(old_lock_fd_);
}

void RunDirectory::commit(const nn::NamedTensors& model_state,
                          const std::function<void(const std::string&)>& save_model,
                          const optim::Optimizer& optimizer, const TrainerState& state) {
  const std::string name = step_name(state.step);
  const std::string previous = latest_name(dir_);
  if (previous == name) return;
  for (const nn::NamedTensors& tensors : {model_state, optimizer.state()}) {
    if (const auto bad = nn::find_nonfinite(tensors)) {
      fail(dir_, fmt::format("not saving step {}: '{}' holds NaN or Inf", state.step, *bad));
    }
  }
  const std::string folder = file(kCheckpoints);
  const std::string tmp = fmt::format("{}/.{}.tmp.{}", folder, name, ::getpid());
  remove_path(tmp);
  if (::mkdir(tmp.c_str(), 0755) != 0)
    fail(tmp, fmt::format("cannot create: {}", std::strerror(errno)));

  if (digest_.empty()) digest_ = data_digest(dir_);
  nlohmann::json trainer = {{"step", state.step},
                            {"epoch_index", state.epoch_index},
                            {"loss_log_bytes", state.loss_log_bytes},
                            {"generators", state.generators},
                            {"flags", state.flags},
                            {"data", digest_}};
  if (state.eval_log_bytes >= 0) trainer["eval_log_bytes"] = state.eval_log_bytes;
  if (state.best.step > 0) {
    trainer["best"] = {
        {"step", state.best.step}, {"value", state.best.value}, {"since", state.best.since}};
  }
  save_model(tmp);
  io::save_safetensors(tmp + "/optimizer.safetensors", optimizer.state());
  io::write_atomic(tmp + "/trainer.json", trainer.dump(1) + "\n");

  const std::string target = folder + "/" + name;
  remove_path(target);  // a checkpoint of this step that `latest` never named
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    fail(target, fmt::format("cannot rename {} to it", tmp));
  }
  io::sync_directory(folder);
  io::write_atomic(file(kLatest), name + "\n");
  if (state.best.step > 0) point_best(state.best.step);
  // the newest keep_ and the best remain
  std::vector<std::string> steps;
  for (const auto& entry : fs::directory_iterator(folder)) {
    const std::string other = entry.path().filename().string();
    if (step_of(other) >= 0) steps.push_back(other);
  }
  std::sort(steps.rbegin(), steps.rend());
  for (size_t i = static_cast<size_t>(keep_); i < steps.size(); ++i) {
    if (step_of(steps[i]) != state.best.step) remove_path(folder + "/" + steps[i]);
  }
  if (!replaces_.empty()) {
    io::exchange_directories(dir_, replaces_);
    remove_run(dir_);  // the old run, now under the staging name
    ::close(old_lock_fd_);
    old_lock_fd_ = -1;
    dir_ = replaces_;
    replaces_.clear();
  }
}

void RunDirectory::point_best(int64_t step) {
  const std::string name = step_name(step);
  if (pointer_name(dir_, kBest) == name) return;
  const std::string path = file(kCheckpoints) + "/" + name;
  if (!fs::is_directory(fs::symlink_status(path)))
    fail(file(kBest), fmt::format("would name {}, which is missing", path));
  io::write_atomic(file(kBest), name + "\n");
}

RunDirectory::Resumed RunDirectory::resume_model(const std::string& dir) {
  Resumed r;
  r.loaded = load_run(dir, "latest");
  r.loaded.model->train();
  r.state = resume_state(dir, r.loaded.checkpoint, r.loaded.step);
  return r;
}

TrainerState RunDirectory::resume_state(const std::string& dir, const std::string& checkpoint,
                                        int64_t model_step) {
  const TrainerState state = read_trainer_state(checkpoint);
  if (state.step != model_step) {
    fail(checkpoint, fmt::format("trainer.json is at step {}, model.safetensors at {}", state.step,
                                 model_step));
  }
  if (step_name(state.step) != fs::path(checkpoint).filename().string()) {
    fail(checkpoint, fmt::format("holds the checkpoint of step {}: it was renamed or copied from "
                                 "another step's folder",
                                 state.step));
  }
  // a run saved before the digest existed has none to compare
  if (!state.data.empty() && state.data != data_digest(dir)) {
    const auto [train, valid] = split_files(dir);
    fail(dir, fmt::format("{} or {} is not the split {}/trainer.json was trained on (data digest "
                          "{}, now {}): changed, or the checkpoint is another run's",
                          train, valid, checkpoint, state.data, data_digest(dir)));
  }
  return state;
}

void RunDirectory::resume_optimizer(optim::Optimizer& optimizer, const std::string& checkpoint,
                                    int64_t step) {
  const std::string path = checkpoint + "/optimizer.safetensors";
  const io::SafetensorsContents contents = io::load_safetensors(path);
  try {
    optimizer.load_state(contents.tensors);  // in file order, which is the order state() wrote
  } catch (const Error& e) {
    fail(path, e.what());
  }
  if (optimizer.step_count() != step) {
    fail(path, fmt::format("is at step {}, trainer.json at {}", optimizer.step_count(), step));
  }
}

nn::Metadata generator_states(const Generator& data_gen, nn::Module& model) {
  nn::Metadata out{{"data", encode_state(data_gen.state())}};
  for (auto& [name, m] : model.named_modules()) {
    if (auto* d = dynamic_cast<nn::Dropout*>(m)) out[name] = encode_state(d->generator().state());
  }
  return out;
}

void restore_generators(const nn::Metadata& states, const std::string& checkpoint,
                        Generator& data_gen, nn::Module& model) {
  const std::string source = checkpoint + "/trainer.json";
  auto get = [&](const std::string& key) {
    auto it = states.find(key);
    if (it == states.end()) fail(source, fmt::format("no state for generator '{}'", key));
    return decode_state(it->second, fmt::format("{}: generator '{}'", source, key));
  };
  std::set<std::string> used = {"data"};
  data_gen.set_state(get("data"));
  for (auto& [name, m] : model.named_modules()) {
    if (auto* d = dynamic_cast<nn::Dropout*>(m)) {
      d->generator().set_state(get(name));
      used.insert(name);
    }
  }
  for (const auto& [name, state] : states) {
    if (!used.contains(name))
      fail(source, fmt::format("a state for generator '{}', which the model does not have",
                               name.substr(0, 60)));
  }
}

}  // namespace tapegrad::train
