// The derivations of docs/ as numbers: for each op family, a small float64 example whose
// gradient is computed twice, once by the tape (the library's backward kernel) and once by the
// chapter's formula written out as plain loops here, and the largest difference between them.
// Exits 1 when any differs by more than 1e-12: the book's formulas are the ones the code runs.
//
//   ./build/examples/derivations [--chapter layernorm|softmax|cross_entropy|attention|
//                                           embedding|dropout|gradcheck]   (default: all)
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "examples/cli.h"
#include "tapegrad/autograd/autograd.h"

using namespace tapegrad;

namespace {

using Vec = std::vector<double>;

Tensor leaf(const Vec& values, const Shape& shape) {
  Tensor t = tensor(std::span<const double>(values), shape, DType::Float64);
  t.set_requires_grad(true);
  return t;
}

Vec values(const Tensor& t) { return t.contiguous().to_vector<double>(); }

std::string show(const Vec& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += fmt::format("{}{:.6f}", i ? ", " : "", v[i]);
  return out + "]";
}

double worst = 0;  // the largest difference over every chapter run

void report(const char* what, const Vec& formula, const Tensor& tape) {
  const Vec t = values(tape);
  double d = 0;
  for (size_t i = 0; i < t.size(); ++i) d = std::max(d, std::abs(formula[i] - t[i]));
  worst = std::max(worst, d);
  fmt::print("  {:<8} formula {}\n  {:<8} tape    {}\n  {:<8} largest difference {:.1e}\n", what,
             show(formula), "", show(t), "", d);
}

// y = gamma * xhat + beta, xhat = (x - mean) * rstd, rstd = 1 / sqrt(var + eps) (biased var)
//   dxhat = dy * gamma
//   dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
//   dgamma = sum over rows of dy * xhat,  dbeta = sum over rows of dy
void layernorm() {
  fmt::print(
      "layer norm, one row x = [1, 2, 4, 7], gamma = [1, 0.5, -1, 2], beta = 0, dy = [0.1, "
      "-0.2, 0.3, 0.4]\n");
  const Vec xv{1, 2, 4, 7}, gv{1, 0.5, -1, 2}, dy{0.1, -0.2, 0.3, 0.4};
  const double eps = 1e-5;
  const size_t C = xv.size();
  double mu = 0, var = 0;
  for (double v : xv) mu += v / C;
  for (double v : xv) var += (v - mu) * (v - mu) / C;
  const double rstd = 1 / std::sqrt(var + eps);
  Vec xhat(C), dxhat(C), dx(C), dgamma(C);
  double m1 = 0, m2 = 0;
  for (size_t c = 0; c < C; ++c) {
    xhat[c] = (xv[c] - mu) * rstd;
    dxhat[c] = dy[c] * gv[c];
    m1 += dxhat[c] / C;
    m2 += dxhat[c] * xhat[c] / C;
    dgamma[c] = dy[c] * xhat[c];
  }
  for (size_t c = 0; c < C; ++c) dx[c] = rstd * (dxhat[c] - m1 - xhat[c] * m2);
  Tensor x = leaf(xv, {1, 4}), gamma = leaf(gv, {4}), beta = leaf({0, 0, 0, 0}, {4});
  layer_norm(x, gamma, beta, eps)
      .backward(tensor(std::span<const double>(dy), {1, 4}, DType::Float64));
  report("dx", dx, x.grad());
  report("dgamma", dgamma, gamma.grad());
  report("dbeta", dy, beta.grad());
}

// softmax:      y = exp(x - max) / sum exp(x - max);  dx = y * (dy - sum(dy * y))
// log_softmax:  y = x - logsumexp(x);                  dx = dy - softmax(x) * sum(dy)
// A row of all -inf (everything masked) gives y = 0 and dx = 0.
void softmax_chapter() {
  const Vec xv{1, 2, 3, -1}, dy{0.5, -1, 0.25, 2};
  fmt::print("softmax and log_softmax of x = [1, 2, 3, -1], dy = [0.5, -1, 0.25, 2]\n");
  double mx = *std::max_element(xv.begin(), xv.end()), z = 0;
  for (double v : xv) z += std::exp(v - mx);
  Vec p(4), dx(4), dlx(4);
  double dot = 0, sum_dy = 0;
  for (size_t j = 0; j < 4; ++j) {
    p[j] = std::exp(xv[j] - mx) / z;
    dot += dy[j] * p[j];
    sum_dy += dy[j];
  }
  for (size_t j = 0; j < 4; ++j) {
    dx[j] = p[j] * (dy[j] - dot);
    dlx[j] = dy[j] - p[j] * sum_dy;
  }
  const Tensor dout = tensor(std::span<const double>(dy), {4}, DType::Float64);
  Tensor x = leaf(xv, {4});
  softmax(x, 0).backward(dout);
  report("softmax", dx, x.grad());
  Tensor x2 = leaf(xv, {4});
  log_softmax(x2, 0).backward(dout);
  report("log", dlx, x2.grad());
  const double inf = INFINITY;
  Tensor masked = leaf({-inf, -inf, -inf, -inf}, {4});
  log_softmax(masked, 0).backward(dout);
  report("all -inf", {0, 0, 0, 0}, masked.grad());
}

// Rows n with target t_n (ignore_index skipped), C classes, label smoothing eps:
//   q = (1 - eps) onehot(t) + eps / C,  loss = mean over kept rows of (logsumexp(z) - q . z)
//   dz = (softmax(z) - q) / (kept rows); an ignored row gets 0
void cross_entropy_chapter() {
  fmt::print(
      "cross-entropy, logits [[2, 1, 0.1], [0.5, 2.5, -1], [1, 1, 1]], targets [0, 1, "
      "ignored], label smoothing 0.1\n");
  const Vec zv{2, 1, 0.1, 0.5, 2.5, -1, 1, 1, 1};
  const std::vector<int64_t> t{0, 1, -100};
  const double eps = 0.1;
  const int64_t C = 3;
  Vec dz(9, 0.0);
  double loss = 0;
  int64_t kept = 0;
  for (int64_t n = 0; n < 3; ++n) kept += t[n] != -100;
  for (int64_t n = 0; n < 3; ++n) {
    if (t[n] == -100) continue;
    double mx = -INFINITY, z = 0;
    for (int64_t c = 0; c < C; ++c) mx = std::max(mx, zv[n * C + c]);
    for (int64_t c = 0; c < C; ++c) z += std::exp(zv[n * C + c] - mx);
    const double lse = mx + std::log(z);
    for (int64_t c = 0; c < C; ++c) {
      const double q = (c == t[n] ? 1 - eps : 0) + eps / C;
      loss += (lse * q - q * zv[n * C + c]) / kept;
      dz[n * C + c] = (std::exp(zv[n * C + c] - lse) - q) / kept;
    }
  }
  Tensor z = leaf(zv, {3, 3});
  const Tensor targets = tensor({0, 1, -100}, {3}, DType::Int64);
  Tensor l = cross_entropy(z, targets, {.ignore_index = -100, .label_smoothing = eps});
  fmt::print("  loss     formula {:.6f}, tape {:.6f}\n", loss, l.item());
  worst = std::max(worst, std::abs(loss - l.item()));
  l.backward();
  report("dlogits", dz, z.grad());
}

// One head (D = 2), queries T = 2, keys S = 3, key 2 blocked for query 0:
//   S = Q K^T / sqrt(D) with blocked entries -inf,  P = softmax(S) by rows,  O = P V
//   dV = P^T dO,  dP = dO V^T,  dS = P * (dP - rowsum(dP * P)),
//   dQ = dS K / sqrt(D),  dK = dS^T Q / sqrt(D)
void attention_chapter() {
  fmt::print(
      "attention, one head: q [2, 2], k and v [3, 2], key 2 blocked for query 0, dO all "
      "ones\n");
  const Vec qv{1, 0, 0.5, -1}, kv{1, 2, -1, 0.5, 0, 1}, vv{1, 0, 0, 3, 2, 2};
  const int64_t T = 2, S = 3, D = 2;
  const double scale = 1 / std::sqrt(2.0);
  const bool blocked[2][3] = {{false, false, true}, {false, false, false}};
  double P[2][3], dP[2][3], dS[2][3];
  for (int64_t i = 0; i < T; ++i) {
    double s[3], mx = -INFINITY, z = 0;
    for (int64_t j = 0; j < S; ++j) {
      s[j] = blocked[i][j] ? -INFINITY
                           : scale * (qv[i * D] * kv[j * D] + qv[i * D + 1] * kv[j * D + 1]);
      mx = std::max(mx, s[j]);
    }
    for (int64_t j = 0; j < S; ++j) z += std::exp(s[j] - mx);
    for (int64_t j = 0; j < S; ++j) P[i][j] = std::exp(s[j] - mx) / z;
  }
  Vec dq(4, 0.0), dk(6, 0.0), dv(6, 0.0);
  for (int64_t i = 0; i < T; ++i) {
    double row = 0;
    for (int64_t j = 0; j < S; ++j) {
      dP[i][j] = vv[j * D] + vv[j * D + 1];  // dO = 1
      row += dP[i][j] * P[i][j];
    }
    for (int64_t j = 0; j < S; ++j) dS[i][j] = P[i][j] * (dP[i][j] - row);
  }
  for (int64_t j = 0; j < S; ++j) {
    for (int64_t d = 0; d < D; ++d) {
      for (int64_t i = 0; i < T; ++i) {
        dv[j * D + d] += P[i][j];
        dk[j * D + d] += dS[i][j] * qv[i * D + d] * scale;
        dq[i * D + d] += dS[i][j] * kv[j * D + d] * scale;
      }
    }
  }
  Tensor q = leaf(qv, {1, 2, 2}), k = leaf(kv, {1, 3, 2}), v = leaf(vv, {1, 3, 2});
  Tensor mask = zeros({2, 3}, DType::Bool);
  mask.set({0, 2}, 1);
  sum(attention(q, k, v, 1, {.blocked = mask})).backward();
  report("dq", dq, q.grad());
  report("dk", dk, k.grad());
  report("dv", dv, v.grad());
}

// out[n] = W[ids[n]];  dW[v] = sum of dout[n] over the n with ids[n] = v (the padding row: 0)
void embedding_chapter() {
  fmt::print(
      "embedding, W [4, 2], ids [1, 3, 1, 0] with padding id 0, dout rows [1, 2], [3, "
      "4], [5, 6], [7, 8]\n");
  const Vec dout{1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<int64_t> ids{1, 3, 1, 0};
  Vec dw(8, 0.0);
  for (size_t n = 0; n < ids.size(); ++n) {
    if (ids[n] == 0) continue;
    for (int64_t c = 0; c < 2; ++c) dw[ids[n] * 2 + c] += dout[n * 2 + c];
  }
  Tensor w = leaf({0, 0, 1, 1, 2, 2, 3, 3}, {4, 2});
  embedding(w, tensor({1, 3, 1, 0}, {4}, DType::Int64), 0)
      .backward(tensor(std::span<const double>(dout), {4, 2}, DType::Float64));
  report("dW", dw, w.grad());
}

// Inverted dropout: y = x * keep / (1 - p), keep ~ Bernoulli(1 - p); dx = dy * keep / (1 - p).
// The mask is drawn once, in the forward, and the backward reuses it.
void dropout_chapter() {
  fmt::print("dropout p = 0.5 on eight ones, dy = 1: the kept positions get 1 / (1 - p) = 2\n");
  Tensor x = leaf(Vec(8, 1.0), {8});
  Generator gen(3);
  const Tensor y = dropout(x, 0.5, /*training=*/true, gen);
  sum(y).backward();
  const Vec yv = values(y);
  Vec dx(8);
  for (size_t i = 0; i < 8; ++i) dx[i] = yv[i] != 0 ? 2.0 : 0.0;  // keep / (1 - p)
  fmt::print("  y        {}\n", show(yv));
  report("dx", dx, x.grad());
}

// gradcheck: each element's analytic gradient against the central difference
// (f(x + h) - f(x - h)) / 2h of the scalar sum(R * f(x)), R a fixed random tensor.
void gradcheck_chapter() {
  fmt::print("gradcheck of x * x, right and with the backward off by 0.1 at element 3\n");
  const Tensor x = leaf({0.5, -1, 2, 3}, {4});
  const GradcheckFn square = [](const std::vector<Tensor>& in) { return mul(in[0], in[0]); };
  fmt::print("  right:  {}\n", gradcheck(square, {x}).message());
  // the same op with a backward that is wrong at element 3, recorded by hand
  const GradcheckFn wrong = [](const std::vector<Tensor>& in) {
    const Tensor xd = in[0].detach();
    Tensor y = mul(xd, xd);
    if (recording(in[0])) {
      record("square_off", {in[0]}, y, {.backward = [xd](const Tensor& dout, Grads& g) {
               double* dx = g.write(0, Writes::Some).grad.data<double>();
               for (int64_t i = 0; i < 4; ++i) {
                 dx[i] +=
                     dout.data<double>()[i] * (2 * xd.data<double>()[i] + (i == 3 ? 0.1 : 0.0));
               }
             }});
    }
    return y;
  };
  fmt::print("  wrong:  {}\n", gradcheck(wrong, {x}).message());
}

}  // namespace

int main(int argc, char** argv) {
  return examples::run_main("derivations", [&] {
    examples::Flags f(argc, argv,
                      "derivations: each chapter's gradient, by its formula and by the tape\n"
                      "usage: derivations [--chapter NAME]");
    const std::string chapter = f.text(
        "chapter", "all",
        "layernorm, softmax, cross_entropy, attention, embedding, dropout, gradcheck or all");
    if (!f.finish()) return 0;
    const std::vector<std::pair<std::string, std::function<void()>>> chapters{
        {"layernorm", layernorm},
        {"softmax", softmax_chapter},
        {"cross_entropy", cross_entropy_chapter},
        {"attention", attention_chapter},
        {"embedding", embedding_chapter},
        {"dropout", dropout_chapter},
        {"gradcheck", gradcheck_chapter}};
    bool found = false;
    for (const auto& [name, run] : chapters) {
      if (chapter != "all" && chapter != name) continue;
      found = true;
      run();
    }
    if (!found) throw examples::FlagError("--chapter: no chapter '" + chapter + "'");
    if (worst > 1e-12) {
      fmt::print(stderr, "derivations: a formula and the tape differ by {:.1e}\n", worst);
      return 1;
    }
    return 0;
  });
}
