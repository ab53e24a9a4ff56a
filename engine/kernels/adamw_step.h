// engine/kernels/adamw_step.h: AdamW's scalars for one step, the one type that every
// instruction-set unit's adamw_update (engine/kernels/kernels.h) and the optimizer's tables
// (engine/core/op_args.h) share, so it sits outside the kernels' namespace.
#pragma once

namespace bp {

// Loshchilov & Hutter 2019 with torch.optim.AdamW's bias correction: beta1, beta2, eps; decay = 1
// - lr * weight_decay; step = lr / (1 - beta1^t); rc2 = 1 / sqrt(1 - beta2^t).
template <class T>
struct AdamWStep {
  T beta1, beta2, eps, decay, step, rc2;
};

}  // namespace bp
