// Everything in the engine, for programs that want it all in one include.
#pragma once

#include "autograd/dtype.h"
#include "autograd/error.h"
#include "autograd/gradcheck.h"
#include "autograd/ops/dropout.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/embedding.h"
#include "autograd/ops/layernorm.h"
#include "autograd/ops/loss.h"
#include "autograd/ops/matmul.h"
#include "autograd/ops/reduce.h"
#include "autograd/ops/shape.h"
#include "autograd/ops/softmax.h"
#include "autograd/random.h"
#include "autograd/shape.h"
#include "autograd/tape.h"
#include "autograd/tensor.h"
