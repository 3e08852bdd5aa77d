// safetensors: writing named tensors atomically, and a reader that validates the whole header
// (length, nesting, dtypes, sizes, offsets tiling the data) before it allocates.
#include "tapegrad/io/safetensors.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "tapegrad/io/files.h"

namespace tapegrad::io {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; this build assumes a little-endian host");

namespace {

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the limit Hugging Face's reader uses
constexpr size_t kMaxRank = 64;

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

[[noreturn]] void fail_checkpoint(const std::string& path, const std::string& what) {
  throw CheckpointError(fmt::format("{}: {}", path, what));
}

std::string quote(const nlohmann::json& v) { return clip(v.dump()); }

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

  try {
    write_atomic(path, [&](const Sink& write) {
      write(&header_len, 8);
      write(text.data(), text.size());
      for (const Tensor& c : packed) {
        write(
            static_cast<const char*>(c.impl().storage->data()) + c.offset() * dtype_size(c.dtype()),
            c.numel() * dtype_size(c.dtype()));
      }
    });
  } catch (const FileError& e) {
    throw CheckpointError(e.what());
  }
}

SafetensorsContents load_safetensors(const std::string& path) {
  try {
    OpenedFile f = open_regular(path, std::numeric_limits<uint64_t>::max());
    return read_safetensors(f.stream, f.size, path);
  } catch (const FileError& e) {
    throw CheckpointError(e.what());
  }
}

namespace {

// One tensor of the header: its name, dtype, shape and byte range in the data region.
struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

// The header after the 8-byte length, parsed once its length and nesting are known to be
// bounded; header_len is set to its length.
nlohmann::json read_header(std::istream& in, uint64_t file_size, const std::string& path,
                           uint64_t& header_len) {
  if (file_size < 8)
    fail_checkpoint(path, fmt::format("truncated: {} bytes, expected at least 8", file_size));
  in.read(reinterpret_cast<char*>(&header_len), 8);
  if (header_len > kMaxHeaderBytes || header_len > file_size - 8) {
    fail_checkpoint(path, fmt::format("header length {} is impossible for a file of {} bytes",
                                      header_len, file_size));
  }
  std::string text(header_len, '\0');
  in.read(text.data(), static_cast<std::streamsize>(header_len));
  if (!in) fail_checkpoint(path, "truncated header");
  if (json_depth(text, kMaxJsonDepth) > kMaxJsonDepth) {
    fail_checkpoint(path, fmt::format("header nests deeper than {} levels", kMaxJsonDepth));
  }
  nlohmann::json header = nlohmann::json::parse(text, nullptr, false);
  if (header.is_discarded() || !header.is_object())
    fail_checkpoint(path, "header is not a JSON object");
  return header;
}

// Tensor `name`'s header entry v, checked against the data region of data_size bytes. Every
// element takes at least one byte of the data region, which bounds each extent and the running
// product (overflow-checked) before anything is multiplied out.
Entry parse_entry(const std::string& name, const nlohmann::json& v, uint64_t data_size,
                  const std::string& path) {
  auto bad = [&](const std::string& why) {
    fail_checkpoint(path, fmt::format("tensor '{}': {}", clip(name), why));
  };
  if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
      !v.contains("data_offsets")) {
    bad("needs dtype, shape and data_offsets");
  }
  const auto& jd = v["dtype"];
  const auto dtype = jd.is_string() ? dtype_from_code(jd.get<std::string>()) : std::nullopt;
  if (!dtype) bad(fmt::format("unsupported dtype {}", quote(jd)));
  Entry e{name, *dtype, {}, 0, 0};
  const auto& js = v["shape"];
  if (!js.is_array() || js.size() > kMaxRank) bad(fmt::format("bad shape {}", quote(js)));
  uint64_t elements = 1;
  bool zero = false;
  for (const auto& d : js) {
    if (!d.is_number_unsigned()) bad(fmt::format("bad shape {}", quote(js)));
    const uint64_t n = d.get<uint64_t>();
    zero = zero || n == 0;
    if (n > data_size && n != 0) bad(fmt::format("shape {} is larger than the file", quote(js)));
    if (!zero && (__builtin_mul_overflow(elements, n, &elements) || elements > data_size)) {
      bad(fmt::format("shape {} is larger than the file", quote(js)));
    }
    e.shape.push_back(static_cast<int64_t>(n));
  }
  const uint64_t bytes = zero ? 0 : elements * dtype_size(e.dtype);  // <= 8 x the file size
  const auto& jo = v["data_offsets"];
  if (!jo.is_array() || jo.size() != 2 || !jo[0].is_number_unsigned() ||
      !jo[1].is_number_unsigned()) {
    bad(fmt::format("bad data_offsets {}", quote(jo)));
  }
  e.begin = jo[0].get<uint64_t>();
  e.end = jo[1].get<uint64_t>();
  if (e.begin > e.end || e.end > data_size) {
    bad(fmt::format("data_offsets [{}, {}] outside the {} data bytes", e.begin, e.end, data_size));
  }
  if (e.end - e.begin != bytes) {
    bad(fmt::format("data_offsets [{}, {}] hold {} bytes, shape {} {} needs {}", e.begin, e.end,
                    e.end - e.begin, e.shape, dtype_name(e.dtype), bytes));
  }
  return e;
}

// The tensors tile the data region exactly, as the safetensors format requires: no overlap,
// no gap, nothing after the last. Sorts entries by offset.
void check_tiling(std::vector<Entry>& entries, uint64_t data_size, const std::string& path) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].begin < covered) {
      fail_checkpoint(path, fmt::format("tensors '{}' and '{}' overlap", clip(entries[i - 1].name),
                                        clip(entries[i].name)));
    }
    if (entries[i].begin > covered) {
      fail_checkpoint(
          path, fmt::format("data bytes [{}, {}) before tensor '{}' belong to no tensor", covered,
                            entries[i].begin, clip(entries[i].name)));
    }
    covered = entries[i].end;
  }
  if (covered != data_size) {
    fail_checkpoint(
        path, fmt::format("data bytes [{}, {}) after the last tensor belong to no tensor", covered,
                          data_size));
  }
}

// Entry e's bytes, read from the data region that starts at data_start; a bool must be 0 or 1.
Tensor read_tensor(std::istream& in, uint64_t data_start, const Entry& e, const std::string& path) {
  Tensor t = empty(e.shape, e.dtype);
  in.seekg(static_cast<std::streamoff>(data_start + e.begin));
  in.read(static_cast<char*>(t.impl().storage->data()),
          static_cast<std::streamsize>(e.end - e.begin));
  if (!in) fail_checkpoint(path, fmt::format("tensor '{}': read failed", clip(e.name)));
  if (e.dtype == DType::Bool) {
    const auto* p = static_cast<const uint8_t*>(t.impl().storage->data());
    for (uint64_t i = 0; i < e.end - e.begin; ++i) {
      if (p[i] > 1) {
        fail_checkpoint(path,
                        fmt::format("tensor '{}': bool byte {} is not 0 or 1", clip(e.name), p[i]));
      }
    }
  }
  return t;
}

}  // namespace

SafetensorsContents read_safetensors(std::istream& in, uint64_t file_size,
                                     const std::string& path) {
  uint64_t header_len = 0;
  const nlohmann::json header = read_header(in, file_size, path, header_len);
  const uint64_t data_size = file_size - 8 - header_len;
  std::vector<Entry> entries;
  SafetensorsContents out;
  for (const auto& item : header.items()) {
    const nlohmann::json& v = item.value();
    if (item.key() != "__metadata__") {
      entries.push_back(parse_entry(item.key(), v, data_size, path));
      continue;
    }
    if (!v.is_object()) fail_checkpoint(path, "__metadata__ is not an object");
    for (const auto& [k, s] : v.items()) {
      if (!s.is_string())
        fail_checkpoint(path, fmt::format("metadata '{}' is not a string", clip(k)));
      out.metadata[k] = s.get<std::string>();
    }
  }
  check_tiling(entries, data_size, path);
  for (const Entry& e : entries) {
    out.tensors.emplace_back(e.name, read_tensor(in, 8 + header_len, e, path));
  }
  return out;
}

}  // namespace tapegrad::io
