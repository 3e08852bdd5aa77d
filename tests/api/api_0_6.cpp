// A program written against the documented public API of tapegrad 0.6.0 (its README, its
// docs/custom_ops.md and the headers' comments), kept as that release's user wrote it: it is
// built and run with every later version, so an API break cannot land unannounced. When a
// release announces a break in CHANGELOG.md (the version raised, a porting note), this file
// becomes the next release's program, changed as the porting note says; until then it is not
// edited. It prints "api 0.6: ok" and exits 0, or names what it found and exits 1. Ported to
// 0.8.0's breaks so far (CHANGELOG.md): the gradcheck and decoding headers' new folders, and the
// names 0.7.0 kept for one release (nn::load_safetensors and its kin,
// tapegrad/autograd/profile.h) gone.
#include <tapegrad/autograd/autograd.h>
#include <tapegrad/check/gradcheck_module.h>
#include <tapegrad/data/data_error.h>
#include <tapegrad/decode/decoding.h>
#include <tapegrad/nn/checkpoint.h>
#include <tapegrad/nn/transformer.h>
#include <tapegrad/pretrained/pretrained.h>
#include <tapegrad/profile/profile.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

using namespace tapegrad;

namespace {

int failures = 0;
void expect(bool ok, const char* what) {
  if (!ok) {
    std::printf("api 0.6: %s\n", what);
    ++failures;
  }
}

// docs/custom_ops.md's op: y = x * w (w broadcast over rows), recorded with one Derivative.
Tensor my_op(const Tensor& x_in, const Tensor& w_in) {
  TG_CHECK(x_in.dim() == 2 && w_in.dim() == 1 && x_in.size(1) == w_in.size(0),
           "my_op: expected [N, C] and [C], got {} and {}", x_in.shape(), w_in.shape());
  const Tensor x = x_in.contiguous(), w = w_in.contiguous();
  Tensor y = empty(x.shape(), x.dtype());
  const int64_t N = x.size(0), C = x.size(1);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < C; ++c)
      y.data<double>()[n * C + c] = x.data<double>()[n * C + c] * w.data<double>()[c];
  }
  if (recording(x, w)) {
    record("my_op", {x, w}, y, {.backward = [x, w](const Tensor& dout, Grads& g) {
             if (g.wants(0)) g.pass(0, mul(dout, w));
             if (g.wants(1)) g.pass(1, sum_to(mul(dout, x), w.shape()));
           }});
  }
  return y;
}

// A user's layer: y = x * scale, its parameter registered by name.
struct Scale : nn::Module {
  Tensor scale;
  explicit Scale(int64_t C) : nn::Module("Scale") {
    scale = ones({C}, DType::Float64);
    scale.set_requires_grad(true);
    register_parameter("scale", scale);
  }
  Tensor forward(const Tensor& x) { return mul(x, scale); }
};

void engine() {
  Generator gen(1);
  Tensor x = uniform({3, 4}, -1.0, 1.0, gen, DType::Float64);
  Tensor w = uniform({4}, -1.0, 1.0, gen, DType::Float64);
  x.set_requires_grad(true);
  w.set_requires_grad(true);
  const GradcheckFn f = [](const std::vector<Tensor>& in) { return my_op(in[0], in[1]); };
  expect(gradcheck(f, {x, w}).ok, "gradcheck of the custom op");
  expect(gradgradcheck(f, {x, w}).ok, "gradgradcheck of the custom op");
  // backward, create_graph, grad() and a hook
  const Tensor loss = sum(pow(my_op(x, w), 2.0));
  int hooked = 0;
  const HookHandle handle = w.register_hook([&](const Tensor& g) {
    ++hooked;
    return g;
  });
  loss.backward(Tensor(), {.create_graph = true});
  expect(hooked == 1 && x.grad().defined() && x.grad().requires_grad(), "backward(create_graph)");
  const std::vector<Tensor> gg = grad({sum(x.grad())}, {w}, {}, {.allow_unused = true});
  expect(gg.size() == 1 && gg[0].defined(), "grad() of a gradient");
  {
    NoGradGuard no_grad;
    expect(!mul(x, 2.0).requires_grad(), "NoGradGuard");
  }
  // a module, gradchecked and saved
  Scale layer(4);
  const Tensor in = uniform({2, 4}, -1.0, 1.0, gen, DType::Float64);
  expect(nn::gradcheck_module(layer, [&] { return layer.forward(in); }).ok, "gradcheck_module");
  expect(layer.named_parameters().size() == 1 && layer.named_parameters()[0].first == "scale",
         "named_parameters");
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("tapegrad_api_0_6." + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  nn::save(layer, (dir / "scale.safetensors").string(), {{"note", "mine"}});
  expect(nn::load(layer, (dir / "scale.safetensors").string()).at("note") == "mine", "nn::load");
  io::save_safetensors((dir / "raw.safetensors").string(), {{"t", in}});
  const io::SafetensorsContents raw = io::load_safetensors((dir / "raw.safetensors").string());
  expect(raw.tensors.size() == 1 && raw.tensors[0].first == "t", "io::load_safetensors");
  // errors: one root, the specific ones caught first
  try {
    io::load_safetensors((dir / "missing.safetensors").string());
    expect(false, "a missing file loaded");
  } catch (const InternalError&) {
    expect(false, "a missing file is an internal error");
  } catch (const Error& e) {
    expect(std::string(e.what()).find("missing.safetensors") != std::string::npos,
           "the error names the file");
  }
  std::filesystem::remove_all(dir);
}

void model() {
  const nn::MiniTransformerConfig cfg{.src_vocab = 12,
                                      .tgt_vocab = 12,
                                      .d_model = 16,
                                      .heads = 2,
                                      .d_ff = 32,
                                      .encoder_layers = 1,
                                      .decoder_layers = 1,
                                      .dropout = 0.0,
                                      .max_len = 16};
  nn::MiniTransformer m(cfg);
  m.eval();
  const Tensor src = from_vector(std::vector<int64_t>{4, 5, 6, 7}, {1, 4});
  ProfileGuard profile;
  const std::vector<nn::Generation> out = nn::generate(m, src, {.max_len = 8});
  expect(out.size() == 1 && !out[0].tokens.empty(), "nn::generate");
  expect(!profile.rows().empty(), "ProfileGuard rows");
}

}  // namespace

int main() {
  try {
    engine();
    model();
  } catch (const std::exception& e) {
    std::printf("api 0.6: %s\n", e.what());
    return 1;
  }
  if (failures == 0) std::printf("api 0.6: ok\n");
  return failures == 0 ? 0 : 1;
}
