// Whole-model golden tests, in the spirit of llm.c's test_gpt2.c: an encoder stack, a decoder
// stack and a MiniTransformer, post-norm and pre-norm, and the decoder-only language model, on
// padded batches of unequal lengths, against numbers PyTorch computed from its own implementation
// of the paper (tests/golden/make_golden.py, committed as tests/golden/<case>.safetensors with the
// weights they came from). A gradcheck compares a model with itself; only a reference sees a wrong
// architecture: a residual left out, an unscaled embedding, a mask dropped.
//
// Tolerances. Both sides compute in float64, so they differ only in the order of sums
// (blocked matrix products here, PyTorch's BLAS there): about 1e-16 relative per operation,
// some hundreds of operations deep. Measured over these cases, the largest difference relative
// to max(1, |value|) was 3.1e-15 (a parameter gradient); logits and losses 1e-15, the Adam
// trajectory 3e-16. kF64 = 1e-10 leaves a margin of more than four orders of magnitude above
// that, for other CPUs and summation orders, and stays seven below the effect of the smallest
// wiring bug planted (1e-3). The float32 pass (the same weights cast down, through our own float
// kernels) differed by at most 3.6e-7, a few float32 roundings (6e-8 each); kF32 = 1e-5.
#include <string>

#include "golden/cases.h"
#include "helpers.h"
#include "tapegrad/decode/decoding.h"
#include "tapegrad/nn/checkpoint.h"
#include "tapegrad/optim/optimizer.h"

using namespace tapegrad;

namespace {

constexpr double kF64 = 1e-10, kF32 = 1e-5;

struct Golden {
  nn::NamedTensors tensors;
  const Tensor& operator[](const std::string& name) const {
    for (const auto& [n, t] : tensors) {
      if (n == name) return t;
    }
    FAIL("the golden file has no tensor '" << name << "'");
    throw;  // unreachable: FAIL throws
  }
  bool has(const std::string& name) const {
    for (const auto& [n, t] : tensors) {
      if (n == name) return true;
    }
    return false;
  }
};

Golden load_golden(const golden::Case& c) {
  return {io::load_safetensors(std::string(TAPEGRAD_GOLDEN_DIR) + "/" + c.name + ".safetensors")
              .tensors};
}

// The module's state from the file's param.<name> (the weights the numbers were made with),
// copied: an optimizer's steps on one model must not reach the file's tensors or another model.
void load_params(nn::Module& m, const Golden& g) {
  for (const auto& [name, t] : m.state()) m.assign(name, g["param." + name].clone());
}

// |got - want| <= tol * max(1, |want|), element by element.
void require_close(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  INFO(what);
  REQUIRE(got.shape() == want.shape());
  const std::vector<double> a = got.to_vector<double>(), b = want.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("element " << i << ": got " << a[i] << ", want " << b[i]);
    REQUIRE(std::abs(a[i] - b[i]) <= tol * std::max(1.0, std::abs(b[i])));
  }
}

// Every parameter's gradient, and only those the file has.
void require_param_grads(const nn::Module& m, const Golden& g) {
  int64_t checked = 0;
  for (const auto& [name, p] : m.named_parameters()) {
    REQUIRE(p.grad().defined());
    require_close(p.grad(), g["grad." + name], kF64, "the gradient of " + name);
    ++checked;
  }
  int64_t in_file = 0;
  for (const auto& [name, t] : g.tensors) {
    in_file += name.rfind("grad.", 0) == 0 && name.rfind("grad.input.", 0) != 0;
  }
  REQUIRE(checked == in_file);
}

Tensor leaf(const Tensor& t) {
  Tensor x = t.detach().to(DType::Float64);
  x.set_requires_grad(true);
  return x;
}

// The stack's output for the file's inputs, in the module's dtype.
Tensor run_stack(const golden::Case& c, nn::Module& m, const Golden& g, const Tensor& x,
                 const Tensor& memory) {
  if (c.kind == golden::Kind::Encoder) {
    return static_cast<nn::Encoder&>(m).forward(x, g["input.padding"]);
  }
  return static_cast<nn::Decoder&>(m).forward(x, memory, nn::causal_mask(x.size(1)),
                                              g["input.tgt_padding"], g["input.memory_padding"]);
}

Tensor mini_loss(nn::MiniTransformer& model, const Golden& g, double smoothing) {
  const Tensor logits = model.forward(g["input.src"], g["input.tgt_in"]);
  const int64_t V = logits.size(-1);
  return cross_entropy(reshape(logits, {-1, V}), reshape(g["input.tgt_out"], {-1}),
                       {.ignore_index = model.config().pad_id, .label_smoothing = smoothing});
}

}  // namespace

TEST_CASE("encoder and decoder stacks match the PyTorch reference", "[nn][golden]") {
  for (const golden::Case& c : golden::cases()) {
    if (c.kind != golden::Kind::Encoder && c.kind != golden::Kind::Decoder) continue;
    INFO(c.name);
    const Golden g = load_golden(c);
    const auto m = golden::build(c);
    load_params(*m, g);
    const bool decoder = c.kind == golden::Kind::Decoder;
    const Tensor x = leaf(g["input.x"]);
    const Tensor memory = decoder ? leaf(g["input.memory"]) : Tensor();
    const Tensor out = run_stack(c, *m, g, x, memory);
    require_close(out, g["expect.out"], kF64, "output");
    const Tensor loss = sum(mul(out, g["input.r"]));
    require_close(reshape(loss, {1}), g["expect.loss"], kF64, "loss");
    loss.backward();
    require_param_grads(*m, g);
    require_close(x.grad(), g["grad.input.x"], kF64, "the gradient of the input");
    if (decoder) require_close(memory.grad(), g["grad.input.memory"], kF64, "of the memory");

    // float32: the same weights cast down, through the float kernels
    NoGradGuard no_grad;
    m->to(DType::Float32);
    const Tensor out32 = run_stack(c, *m, g, g["input.x"].to(DType::Float32),
                                   decoder ? g["input.memory"].to(DType::Float32) : Tensor());
    require_close(out32, g["expect.out"], kF32, "float32 output");
  }
}

TEST_CASE("MiniTransformer matches the PyTorch reference", "[nn][golden]") {
  for (const golden::Case& c : golden::cases()) {
    if (c.kind != golden::Kind::Mini) continue;
    INFO(c.name);
    const Golden g = load_golden(c);
    auto build = [&] {
      auto m = std::static_pointer_cast<nn::MiniTransformer>(golden::build(c));
      load_params(*m, g);
      return m;
    };
    auto model = build();
    require_close(model->forward(g["input.src"], g["input.tgt_in"]), g["expect.logits"], kF64,
                  "logits");
    require_close(reshape(mini_loss(*model, g, 0.0), {1}), g["expect.loss"], kF64,
                  "loss without label smoothing");
    const Tensor smoothed = mini_loss(*model, g, 0.1);
    require_close(reshape(smoothed, {1}), g["expect.loss_smoothed"], kF64,
                  "loss with label smoothing 0.1");
    smoothed.backward();
    require_param_grads(*model, g);

    // greedy decodes of three sources, from the same weights
    const std::vector<nn::Generation> decoded =
        nn::generate(*model, g["input.decode_src"], {.max_len = 6, .bos = 1, .eos = 2});
    const std::vector<int64_t> want = g["expect.greedy"].to_vector<int64_t>();
    for (size_t b = 0; b < decoded.size(); ++b) {
      std::vector<int64_t> row(want.begin() + b * 6, want.begin() + (b + 1) * 6);
      while (!row.empty() && row.back() == -1) row.pop_back();
      INFO("greedy decode of source " << b);
      CHECK(decoded[b].tokens == row);
    }

    // ten Adam steps, dropout off: the loss before each
    auto fresh = build();
    optim::Adam adam(fresh->named_parameters(), {.lr = 1e-2});
    std::vector<double> losses;
    for (int step = 0; step < 10; ++step) {
      fresh->zero_grad();
      const Tensor loss = mini_loss(*fresh, g, 0.1);
      losses.push_back(loss.item());
      loss.backward();
      adam.step();
    }
    require_close(from_vector(losses, {10}).to(DType::Float64), g["expect.adam_losses"], kF64,
                  "Adam loss trajectory");

    NoGradGuard no_grad;
    model->to(DType::Float32);
    require_close(model->forward(g["input.src"], g["input.tgt_in"]), g["expect.logits"], kF32,
                  "float32 logits");
  }
}

namespace {
Tensor lm_loss(nn::LanguageModel& model, const Tensor& ids, const Tensor& targets) {
  const Tensor logits = model.forward(ids);
  return cross_entropy(reshape(logits, {-1, logits.size(-1)}), reshape(targets, {-1}));
}

// AdamW (weight decay 0.1, betas 0.9 and 0.99) with clipping at 1.0 on the file's batches and
// learning rates, the nanoGPT recipe's optimizer: the loss before each step.
std::vector<double> lm_adamw_losses(nn::LanguageModel& model, const Golden& g) {
  optim::AdamW adamw(model.named_parameters(), {.lr = 1.0, .beta2 = 0.99, .weight_decay = 0.1});
  const Tensor xs = g["input.train_x"], ys = g["input.train_y"];
  const std::vector<double> lrs = g["input.lrs"].to_vector<double>();
  std::vector<double> losses;
  for (int64_t t = 0; t < xs.size(0); ++t) {
    model.zero_grad();
    const Tensor loss = lm_loss(model, squeeze(slice(xs, 0, t, t + 1), 0).contiguous(),
                                squeeze(slice(ys, 0, t, t + 1), 0).contiguous());
    losses.push_back(loss.item());
    loss.backward();
    optim::clip_grad_norm(model.named_parameters(), 1.0);
    adamw.set_lr(lrs[t]);
    adamw.step();
  }
  return losses;
}
}  // namespace

TEST_CASE("the language model matches the PyTorch reference", "[nn][golden]") {
  const golden::Case& c = golden::cases().back();
  REQUIRE(c.kind == golden::Kind::LanguageModel);
  const Golden g = load_golden(c);
  auto build = [&] {
    auto m = std::static_pointer_cast<nn::LanguageModel>(golden::build(c));
    load_params(*m, g);
    return m;
  };
  auto model = build();
  require_close(model->forward(g["input.ids"]), g["expect.logits"], kF64, "logits");
  const Tensor loss = lm_loss(*model, g["input.ids"], g["input.targets"]);
  require_close(reshape(loss, {1}), g["expect.loss"], kF64, "loss");
  loss.backward();
  require_param_grads(*model, g);

  // twelve greedy tokens after a prompt of three: the context slides past the block of 8
  const std::vector<int64_t> prompt = g["input.prompt"].to_vector<int64_t>();
  CHECK(nn::continue_text(*model, prompt, {.max_new_tokens = 12, .sample = false}) ==
        g["expect.greedy"].to_vector<int64_t>());

  // fifty AdamW steps with clipping, in float64 and in float32 (against PyTorch's float32 run:
  // the largest difference measured was 4.9e-7 relative, a few roundings carried through the
  // steps, so kF32 holds)
  auto fresh = build();
  require_close(from_vector(lm_adamw_losses(*fresh, g), {50}).to(DType::Float64),
                g["expect.adamw_losses"], kF64, "AdamW loss trajectory");
  auto fresh32 = build();
  fresh32->to(DType::Float32);
  require_close(from_vector(lm_adamw_losses(*fresh32, g), {50}).to(DType::Float64),
                g["expect.adamw_losses_f32"], kF32, "float32 AdamW loss trajectory");
}
