// What a resumed run holds to its checkpoint (retro-train --resume, train/trainer.cpp): a recipe option that must not
// change is refused in one line naming the checkpoint, and the options that may change (the schedule, the
// optimizer) are said when they do.
// provides: refuse_other_option, refuse_other_global_batch, note_changed_schedule
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <tuple>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace retro {

// A resume that changes a recipe option is refused in one line: the checkpoint's value of `key` (`older` where a
// checkpoint from before the option lacks it) against this run's.
template <typename T>
void refuse_other_option(const std::string& state_path, const nlohmann::json& st, const char* key, T older, T now,
                         const char* flag) {
    const T was = st.value(key, older);
    if (was == now) return;
    if constexpr (std::is_same_v<T, bool>)
        user_error_in(state_path, cat("checkpoint was made ", was ? "with " : "without ", flag),
                      cat("resume ", was ? "with " : "without ", flag));
    else
        user_error_in(state_path, cat("checkpoint was made with ", flag, " ", was), cat("resume with the same ", flag));
}

// The global batch a checkpoint was trained with (batch_size x grad_accum, recorded since 2026-12-01; an older
// checkpoint lacks it and is taken as it is): the data cursor counts sequences of that batch, so another one would
// train on other sequences per step than the straight run. The same product split otherwise (a smaller
// --batch-size with more --grad-accum, as the memory check advises) reads the same sequences.
void refuse_other_global_batch(const std::string& state_path, const nlohmann::json& st, std::int64_t batch,
                               std::int64_t accum);

// The schedule and optimizer options may change on a resume on purpose (a longer run, a lower lr after a loss
// spike), but never unannounced: one line naming each option whose value differs from the checkpoint's.
void note_changed_schedule(const nlohmann::json& st, std::int64_t step,
                           std::initializer_list<std::tuple<const char*, const char*, double>> options);

}  // namespace retro
