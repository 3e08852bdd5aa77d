#include "nn/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

namespace tapegrad::nn {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; this build assumes a little-endian host");

namespace {

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the limit Hugging Face's reader uses
thread_local bool t_fail_before_rename = false;

const char* dtype_code(DType d) {
  switch (d) {
    case DType::Float32: return "F32";
    case DType::Float64: return "F64";
    case DType::Int64: return "I64";
    case DType::Bool: return "BOOL";
  }
  return "?";
}

std::optional<DType> dtype_from_code(const std::string& code) {
  for (DType d : {DType::Float32, DType::Float64, DType::Int64, DType::Bool}) {
    if (code == dtype_code(d)) return d;
  }
  return std::nullopt;
}

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw CheckpointError(fmt::format("{}: {}", path, what));
}

// Writes all of `data` to fd, or throws.
void write_all(int fd, const void* data, size_t n, const std::string& path) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail(path, fmt::format("write failed: {}", std::strerror(errno)));
    p += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const Metadata& metadata) {
  nlohmann::json header = nlohmann::json::object();
  std::vector<Tensor> packed;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    TG_CHECK(!name.empty() && name != "__metadata__" && !header.contains(name),
             "save_safetensors: invalid or duplicate tensor name '{}'", name);
    const Tensor c = t.contiguous();
    const uint64_t nbytes = c.numel() * dtype_size(c.dtype());
    header[name] = {{"dtype", dtype_code(c.dtype())},
                    {"shape", c.shape()},
                    {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
    packed.push_back(c);
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // align the data to 8 bytes
  const uint64_t header_len = text.size();

  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(tmp, fmt::format("cannot create: {}", std::strerror(errno)));
  try {
    write_all(fd, &header_len, 8, tmp);
    write_all(fd, text.data(), text.size(), tmp);
    for (const Tensor& c : packed) {
      write_all(fd, static_cast<const char*>(c.impl().storage->data()) +
                        c.offset() * dtype_size(c.dtype()),
                c.numel() * dtype_size(c.dtype()), tmp);
    }
    if (::fsync(fd) != 0) fail(tmp, fmt::format("fsync failed: {}", std::strerror(errno)));
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    ::unlink(tmp.c_str());
    fail(tmp, fmt::format("close failed: {}", std::strerror(errno)));
  }
  if (t_fail_before_rename) {
    t_fail_before_rename = false;
    ::unlink(tmp.c_str());
    fail(path, "save failed before the rename (injected by fail_next_save_before_rename)");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    fail(path, fmt::format("cannot rename {} over it: {}", tmp, why));
  }
}

SafetensorsContents load_safetensors(const std::string& path) {
  std::error_code ec;
  const uint64_t file_size = std::filesystem::file_size(path, ec);
  if (ec) fail(path, fmt::format("cannot read: {}", ec.message()));
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open");
  return read_safetensors(in, file_size, path);
}

SafetensorsContents read_safetensors(std::istream& in, uint64_t file_size, const std::string& path) {
  if (file_size < 8) fail(path, fmt::format("truncated: {} bytes, expected at least 8", file_size));

  uint64_t header_len = 0;
  in.read(reinterpret_cast<char*>(&header_len), 8);
  if (header_len > kMaxHeaderBytes || header_len > file_size - 8) {
    fail(path, fmt::format("header length {} is impossible for a file of {} bytes", header_len,
                           file_size));
  }
  std::string text(header_len, '\0');
  in.read(text.data(), static_cast<std::streamsize>(header_len));
  if (!in) fail(path, "truncated header");
  const nlohmann::json header = nlohmann::json::parse(text, nullptr, false);
  if (header.is_discarded() || !header.is_object()) fail(path, "header is not a JSON object");
  const uint64_t data_size = file_size - 8 - header_len;

  struct Entry {
    std::string name;
    DType dtype;
    Shape shape;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
  SafetensorsContents out;
  for (const auto& item : header.items()) {
    const std::string& name = item.key();
    const nlohmann::json& v = item.value();
    if (name == "__metadata__") {
      if (!v.is_object()) fail(path, "__metadata__ is not an object");
      for (const auto& [k, s] : v.items()) {
        if (!s.is_string()) fail(path, fmt::format("metadata '{}' is not a string", k));
        out.metadata[k] = s.get<std::string>();
      }
      continue;
    }
    auto bad = [&](const std::string& why) { fail(path, fmt::format("tensor '{}': {}", name, why)); };
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
        !v.contains("data_offsets")) {
      bad("needs dtype, shape and data_offsets");
    }
    const auto& jd = v["dtype"];
    const auto dtype = jd.is_string() ? dtype_from_code(jd.get<std::string>()) : std::nullopt;
    if (!dtype) bad(fmt::format("unsupported dtype {}", jd.dump()));
    Entry e{name, *dtype, {}, 0, 0};
    const auto& js = v["shape"];
    if (!js.is_array()) bad("shape is not an array");
    uint64_t elements = 1;
    for (const auto& d : js) {
      if (!d.is_number_unsigned()) bad(fmt::format("bad shape {}", js.dump()));
      const uint64_t n = d.get<uint64_t>();
      // every element takes at least one byte of the data region: bounds the product too
      if (n > data_size && n != 0) bad(fmt::format("shape {} is larger than the file", js.dump()));
      elements = n == 0 || elements == 0 ? 0 : elements * n;
      if (elements > data_size) bad(fmt::format("shape {} is larger than the file", js.dump()));
      e.shape.push_back(static_cast<int64_t>(n));
    }
    const auto& jo = v["data_offsets"];
    if (!jo.is_array() || jo.size() != 2 || !jo[0].is_number_unsigned() ||
        !jo[1].is_number_unsigned()) {
      bad(fmt::format("bad data_offsets {}", jo.dump()));
    }
    e.begin = jo[0].get<uint64_t>();
    e.end = jo[1].get<uint64_t>();
    if (e.begin > e.end || e.end > data_size) {
      bad(fmt::format("data_offsets [{}, {}] outside the {} data bytes", e.begin, e.end, data_size));
    }
    if (e.end - e.begin != elements * dtype_size(e.dtype)) {
      bad(fmt::format("data_offsets [{}, {}] hold {} bytes, shape {} {} needs {}", e.begin, e.end,
                      e.end - e.begin, e.shape, dtype_name(e.dtype), elements * dtype_size(e.dtype)));
    }
    entries.push_back(std::move(e));
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < entries.size(); ++i) {
    if (entries[i].begin < entries[i - 1].end) {
      fail(path, fmt::format("tensors '{}' and '{}' overlap", entries[i - 1].name, entries[i].name));
    }
  }
  for (const Entry& e : entries) {
    Tensor t = empty(e.shape, e.dtype);
    in.seekg(static_cast<std::streamoff>(8 + header_len + e.begin));
    in.read(static_cast<char*>(t.impl().storage->data()),
            static_cast<std::streamsize>(e.end - e.begin));
    if (!in) fail(path, fmt::format("tensor '{}': read failed", e.name));
    if (e.dtype == DType::Bool) {
      const auto* p = static_cast<const uint8_t*>(t.impl().storage->data());
      for (uint64_t i = 0; i < e.end - e.begin; ++i) {
        if (p[i] > 1) fail(path, fmt::format("tensor '{}': bool byte {} is not 0 or 1", e.name, p[i]));
      }
    }
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
}

void fail_next_save_before_rename() { t_fail_before_rename = true; }

void save(const Module& module, const std::string& path, const Metadata& metadata) {
  save_safetensors(path, module.state(), metadata);
}

Metadata load(Module& module, const std::string& path, bool strict) {
  SafetensorsContents file = load_safetensors(path);
  std::map<std::string, Tensor> found(file.tensors.begin(), file.tensors.end());
  std::vector<std::string> problems;
  std::vector<std::pair<std::string, Tensor>> matched;
  std::set<std::string> expected;
  for (const auto& [name, current] : module.state()) {
    expected.insert(name);
    auto it = found.find(name);
    if (it == found.end()) {
      if (strict) problems.push_back(fmt::format("missing '{}'", name));
      continue;
    }
    const Tensor& t = it->second;
    if (t.shape() != current.shape()) {
      problems.push_back(fmt::format("'{}' has shape {} in the file, {} in the model", name,
                                     t.shape(), current.shape()));
    } else if (t.dtype() != current.dtype()) {
      problems.push_back(fmt::format("'{}' has dtype {} in the file, {} in the model", name,
                                     t.dtype(), current.dtype()));
    } else {
      matched.emplace_back(name, t);
    }
  }
  if (strict) {
    for (const auto& [name, t] : file.tensors) {
      if (!expected.contains(name)) problems.push_back(fmt::format("unexpected '{}'", name));
    }
  }
  if (!problems.empty()) {
    fail(path, fmt::format("does not fit {}: {}", module.type_name(), fmt::join(problems, "; ")));
  }
  for (const auto& [name, t] : matched) module.assign(name, t);
  return file.metadata;
}

}  // namespace tapegrad::nn
