// Implementation of resume_checks.h.
#include "train/resume_checks.h"

#include <charconv>

#include "core/log.h"

namespace retro {

namespace {
// A value as it was typed: integers without a decimal point, doubles in their shortest round-trip form.
std::string option_value(double v) {
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general);
    return std::string(buf, r.ptr);
}
}  // namespace

void refuse_other_global_batch(const std::string& state_path, const nlohmann::json& st, std::int64_t batch,
                               std::int64_t accum) {
    if (!st.contains("batch_size") || !st["batch_size"].is_number_integer() || !st.contains("grad_accum") ||
        !st["grad_accum"].is_number_integer())
        return;
    const std::int64_t was_batch = st["batch_size"].get<std::int64_t>(), was_accum = st["grad_accum"].get<std::int64_t>();
    if (was_batch * was_accum == batch * accum) {
        if (was_batch != batch)
            log_info(cat("resume: --batch-size ", batch, " x --grad-accum ", accum, " (was ", was_batch, " x ", was_accum,
                         "): the same global batch of ", batch * accum, " sequences"));
        return;
    }
    user_error_in(state_path,
                  cat("checkpoint was made with a global batch of ", was_batch * was_accum, " sequences (--batch-size ",
                      was_batch, " x --grad-accum ", was_accum, "), not ", batch * accum),
                  cat("resume with --batch-size x --grad-accum = ", was_batch * was_accum,
                      " (the data cursor counts sequences of that batch), or start over with --force"));
}

void note_changed_schedule(const nlohmann::json& st, std::int64_t step,
                           std::initializer_list<std::tuple<const char*, const char*, double>> options) {
    std::string changed;
    for (const auto& [key, flag, now] : options) {
        if (!st.contains(key) || !st[key].is_number()) continue;
        const double was = st[key].get<double>();
        if (was == now) continue;
        changed += cat(changed.empty() ? "" : ", ", flag, " ", option_value(now), " (was ", option_value(was), ")");
    }
    if (!changed.empty())
        log_info(cat("resume: ", changed, "; the run continues from step ", step, " under the new values"));
}

}  // namespace retro
