// Retention (RetNet / fla semantics, RETENTION.md): four modes with forward and backward on the CPU,
// templated on float/double; CUDA versions with the same signatures are declared in retention/retention_cuda.h
// (and defined in kernels/).
// provides: Shape, Options, fla_log_gamma, resolve, decay_pow, decay_table (decay.h);
//           naive_forward/backward + NaiveReport (naive.h); parallel_forward/backward, parallel_last_row
//           (parallel.h); recurrent_forward/backward (recurrent.h); chunkwise_forward/backward (chunkwise.h)
#pragma once
#include "retention/chunkwise.h"
#include "retention/decay.h"
#include "retention/naive.h"
#include "retention/parallel.h"
#include "retention/recurrent.h"
