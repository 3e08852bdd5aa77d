// The fast room's cross-entropy (ops/loss.cpp), tested equal to its reference there: fused
// log-softmax and negative log-likelihood in one pass each way.
// The backward of the fusion is the famous simplification dlogits = softmax - q.
//
// Glossary: N rows, C classes.
#include <algorithm>
#include <cmath>
#include <vector>

#include "tapegrad/autograd/fast/fast_room.h"
#include "tapegrad/autograd/fast/vmath.h"
#include "tapegrad/autograd/ops/elementwise.h"
#include "tapegrad/autograd/ops/reduce.h"
#include "tapegrad/autograd/ops/softmax.h"
#include "tapegrad/autograd/tape.h"
#include "tapegrad/autograd/threads.h"
#include "tapegrad/profile/profile.h"

namespace tapegrad {

namespace {

// logits (N,C), targets (N) -> loss (N) each row's loss (0 where ignored), lse (N) the row
// log-sum-exps. Runs rows n0..n1.
// loss_n = (1 - eps) (lse - z_y) + eps/C sum_c (lse - z_c)
template <class T>
void cross_entropy_forward(double* loss, T* lse, const T* logits, const int64_t* targets, int64_t C,
                           int64_t ignore_index, double eps, int64_t n0, int64_t n1) {
  for (int64_t n = n0; n < n1; ++n) {
    const T* z = logits + n * C;
    const T maxv = lane_max(z, C);
    // in lanes, so the exps vectorise (one running sum would make the loop sequential)
    const double sum =
        lane_sum_of<double>(C, [&](int64_t c) { return static_cast<double>(vexp(z[c] - maxv)); });
    const double zsum =
        lane_sum_of<double>(C, [&](int64_t c) { return static_cast<double>(z[c]); });
    const double l = maxv + std::log(sum);
    lse[n] = static_cast<T>(l);
    loss[n] = targets[n] == ignore_index
                  ? 0.0
                  : (1 - eps) * (l - z[targets[n]]) + eps / static_cast<double>(C) * (C * l - zsum);
  }
}

// dlogits_nc += dloss / count * (softmax_nc - q_nc),  q = (1 - eps) onehot(y) + eps / C
// and 0 for an ignored row; store assigns or adds (assign_or_add). Rows n0..n1.
template <class T, class Store>
void cross_entropy_backward(Store store, T* dlogits, T dloss, const T* logits, const T* lse,
                            const int64_t* targets, int64_t C, int64_t ignore_index, double eps,
                            int64_t count, int64_t n0, int64_t n1) {
  // count == 0 when every target is ignored: the loss is a constant 0
  const T scale = count > 0 ? dloss / static_cast<T>(count) : T{0};
  const auto smooth = static_cast<T>(eps / static_cast<double>(C));
  for (int64_t n = n0; n < n1; ++n) {
    const T* z = logits + n * C;
    T* dz = dlogits + n * C;
    if (targets[n] == ignore_index) {
      for (int64_t c = 0; c < C; ++c) store(dz[c], T{0});
      continue;
    }
    for (int64_t c = 0; c < C; ++c) {
      const T q = smooth + (c == targets[n] ? static_cast<T>(1 - eps) : T{0});
      store(dz[c], scale * (vexp(z[c] - lse[n]) - q));
    }
  }
}

}  // namespace

Tensor fast_cross_entropy(const Tensor& logits_in, const Tensor& targets_in,
                          const CrossEntropyOptions& options) {
  const double eps = options.label_smoothing;
  const int64_t N = logits_in.size(0), C = logits_in.size(1);
  const Tensor logits = logits_in.contiguous();
  const Tensor targets = targets_in.contiguous();
  const int64_t* y = targets.data<int64_t>();
  int64_t count = 0;
  for (int64_t n = 0; n < N; ++n) count += y[n] != options.ignore_index;
  Tensor lse = empty({N}, logits.dtype());
  Tensor out = empty({}, logits.dtype());
  dispatch_floating("cross_entropy", logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    // from the buffer cache: a malloc over 1 KiB makes glibc merge its fast bins first
    const Tensor losses = empty({N}, DType::Float64);
    double* loss = losses.data<double>();
    T* pl = lse.data<T>();
    const T* pz = logits.data<T>();
    parallel_for(N, grain_of_items(C), [&](int64_t n0, int64_t n1) {
      cross_entropy_forward<T>(loss, pl, pz, y, C, options.ignore_index, eps, n0, n1);
    });
    double total = 0;  // summed in row order: the same bits for any thread count
    for (int64_t n = 0; n < N; ++n) total += loss[n];
    *out.data<T>() = static_cast<T>(count > 0 ? total / static_cast<double>(count) : 0.0);
  });
  if (recording(logits)) {
    record(op_name("cross_entropy"), {logits}, out,
           {.fast =
                [logits = logits.detach(), targets, lse, N, C, eps, count,
                 ignore = options.ignore_index](const Tensor& dout, Grads& g) {
                  dispatch_floating("cross_entropy", dout.dtype(), [&](auto tag) {
                    using T = decltype(tag);
                    const auto [grad, first] = g.write(0, Writes::Every);
                    const T dloss = *dout.data<T>();
                    assign_or_add(first, [&, dz = grad.data<T>()](auto store) {
                      parallel_for(N, grain_of_items(C), [&](int64_t n0, int64_t n1) {
                        cross_entropy_backward<T>(store, dz, dloss, logits.data<T>(), lse.data<T>(),
                                                  targets.data<int64_t>(), C, ignore, eps, count,
                                                  n0, n1);
                      });
                    });
                  });
                },
            .reference =
                [logits = logits.detach(), targets, options](Grads& g) {
                  return std::vector{cross_entropy_reference(g.input(0, logits), targets, options)};
                }},
           {{"logits", logits}, {"targets", targets}, {"lse", lse}});
  }
  return out;
}

}  // namespace tapegrad
