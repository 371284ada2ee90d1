// retro-train's checkpoints: a step's weights, optimizer and state.json written (DONE last), and read back on
// --resume, holding the run to the recipe, data and files the checkpoint records (train/resume_checks.h).
#include "train/trainer_impl.h"

namespace retro::train_impl {

void Trainer::save_checkpoint(std::int64_t step) {
    // the --db and --knn this run maps are the ones on disk still: a checkpoint records their stamps below, and one
    // taken after they were made again (by another run's --force) let --resume go on over the new ones, mixing the two
    // (a helper's audit, session 69); the checkpoints before stay, made on the files the run read
    input_stamps_check({o_.db, o_.no_retrieval ? std::string() : o_.neighbours});
    const std::string dir = checkpoint_dir(o_.out, step);
    fs::create_directories(dir);
    params_save((fs::path(dir) / "model.safetensors").string(), model_->params(), model_->layout(), config_);
    opt_->save((fs::path(dir) / "optimizer.safetensors").string());
    nlohmann::json st = {{"step", step},
                         {"seed", o_.seed},
                         {"epoch", cursor_.epoch},
                         {"position", cursor_.pos},
                         {"train_sequences", data_->train_seqs().size()},
                         {"chunks", data_->db().chunk_count()},
                         {"db_outputs", folder_outputs_stamp(o_.db)},
                         // which tokenizer the ids are (data/run_tokenizer.h): --init-from a checkpoint of a run that
                         // has no manifest yet is then checked too
                         {"tokenizer_fingerprint", fs::exists(fs::path(o_.db) / "manifest.json")
                                                       ? db_tokenizer_fingerprint(manifest_read(o_.db))
                                                       : std::string()},
                         {"neighbours_outputs", o_.no_retrieval ? std::string() : folder_outputs_stamp(o_.neighbours)},
                         {"config", config_.to_json()},
                         {"no_retrieval", o_.no_retrieval},
                         {"retrieval_dropout", o_.retrieval_dropout},
                         {"retrieval_lr_scale", o_.retrieval_lr_scale},
                         {"oracle_neighbours", o_.oracle_neighbours},
                         {"oracle_splice", o_.oracle_splice},
                         {"oracle_hindsight", o_.oracle_hindsight},
                         {"oracle_until", o_.oracle_until},
                         {"fused_attention", fused_attention()},
                         {"neighbour_continuation", kNeighbourContinuationRule},
                         {"train_docs_fraction", o_.train_docs_fraction},
                         {"train_only", train_only_},
                         {"init_from_fingerprint", init_.fingerprint},
                         {"batch_size", o_.batch_size},
                         {"grad_accum", o_.grad_accum},
                         {"steps", o_.steps},
                         {"lr", o_.lr},
                         {"min_lr_ratio", o_.min_lr_ratio},
                         {"warmup", o_.warmup},
                         {"weight_decay", o_.weight_decay},
                         {"beta1", o_.beta1},
                         {"beta2", o_.beta2},
                         {"eps", o_.eps},
                         {"clip", o_.clip},
                         {"metrics_missing_steps", metrics_missing_}};
    if (continuation_from_step_ > 0) st["neighbour_continuation_from_step"] = continuation_from_step_;
    // read back while in the page cache: a resume or retro-generate --checkpoint holds the files to these
    for (const char* name : {"model.safetensors", "optimizer.safetensors"})
        st["fingerprints"][name] = fingerprint_file((fs::path(dir) / name).string());
    write_file_atomic((fs::path(dir) / "state.json").string(), st.dump(2) + "\n");
    write_file_atomic((fs::path(dir) / "DONE").string(), "");   // last: the checkpoint is complete
    train_stop_set_resume_step(o_.out, step);
    prune_checkpoints(o_.out, o_.keep_checkpoints);
}

std::int64_t Trainer::load_checkpoint(const std::string& dir) {
    const std::string sp = (fs::path(dir) / "state.json").string();
    const nlohmann::json st = json_read_file(sp);   // (listed for the tool frame's message on a field of the wrong type)
    if (st.value("config", nlohmann::json()) != config_.to_json())
        user_error_in(sp, "checkpoint was made with another model config", "resume with the run's config.json");
    // before the split check: another fraction trains on another number of sequences
    refuse_other_option(sp, st, "train_docs_fraction", 1.0, o_.train_docs_fraction, "--train-docs-fraction");
    if (st.value("chunks", std::int64_t(-1)) != data_->db().chunk_count() ||
        st.value("train_sequences", std::int64_t(-1)) != static_cast<std::int64_t>(data_->train_seqs().size()))
        user_error_in(sp, "checkpoint was made on another database or split", "resume with the same --db and --val-fraction");
    // the files themselves (their fingerprints in the folders' manifests; a checkpoint from before session 37 has none):
    // a database of the same size with other text, or other neighbours of the same database
    for (const auto& [key, flag, dir] : {std::tuple<const char*, const char*, std::string>{"db_outputs", "--db", o_.db},
                                         {"neighbours_outputs", "--knn", o_.no_retrieval ? std::string() : o_.neighbours}}) {
        const std::string was = st.value(key, std::string()), now = folder_outputs_stamp(dir);
        if (!was.empty() && !now.empty() && was != now)
            user_error_in(sp, cat("checkpoint was made on another ", flag, " (", dir, "'s files differ from the ones it ",
                                  "trained on)"),
                          cat("resume with the run's ", flag, ", or start over with --force"));
    }
    // the recipe options a resume must repeat (a checkpoint from before an option lacks it: the option's default)
    refuse_other_option(sp, st, "seed", std::uint64_t(0), o_.seed, "--seed");
    refuse_other_option(sp, st, "no_retrieval", false, o_.no_retrieval, "--no-retrieval");
    refuse_other_option(sp, st, "retrieval_dropout", 0.0, o_.retrieval_dropout, "--retrieval-dropout");
    refuse_other_option(sp, st, "retrieval_lr_scale", 1.0, o_.retrieval_lr_scale, "--retrieval-lr-scale");
    refuse_other_option(sp, st, "oracle_neighbours", 0.0, o_.oracle_neighbours, "--oracle-neighbours");
    refuse_other_option(sp, st, "oracle_splice", false, o_.oracle_splice, "--oracle-splice");
    refuse_other_option(sp, st, "oracle_hindsight", false, o_.oracle_hindsight, "--oracle-hindsight");
    refuse_other_option(sp, st, "oracle_until", std::int64_t(0), o_.oracle_until, "--oracle-until");
    refuse_other_global_batch(sp, st, o_.batch_size, o_.grad_accum);
    // which neighbour units the run read (data/chunk_db.h): a checkpoint from before the field read the older rule
    // (said below, after the checks); another rule than this version's is one a later version made
    const std::string rule = st.value("neighbour_continuation", std::string());
    if (!rule.empty() && rule != kNeighbourContinuationRule)
        user_error_in(sp, cat("checkpoint was made with the neighbour continuation rule \"", rule, "\", which this ",
                              "RetroKit does not know"),
                      "resume with the RetroKit version that made it");
    // the attention kernels may change on a resume (as the device and dtype may: the same math within bf16
    // rounding), but not unannounced; a checkpoint from before session 14 ran bf16 without the fused kernels
    const bool was_fused = st.value("fused_attention", false);
    if (was_fused != fused_attention())
        log_info(cat("resume: the checkpoint was trained ", was_fused ? "with" : "without", " the fused attention, ",
                     "this run continues ", fused_attention() ? "with" : "without", " it"));
    const std::string groups = st.value("train_only", std::string("cca,encoder,decoder"));   // older: all
    if (groups != train_only_)
        user_error_in(sp, "checkpoint was made with --train-only " + groups, "resume with the same --train-only");
    if (st.value("init_from_fingerprint", std::string()) != init_.fingerprint)
        user_error_in(sp, "checkpoint was made with another --init-from (or none)", "resume with the same --init-from");
    std::int64_t step = 0, epoch = 0, position = 0;
    try {
        metrics_missing_ = st.value("metrics_missing_steps", std::int64_t(0));
        continuation_from_step_ = st.value("neighbour_continuation_from_step", std::int64_t(0));
        step = st.at("step").get<std::int64_t>();
        epoch = st.at("epoch").get<std::int64_t>();
        position = st.at("position").get<std::int64_t>();
    } catch (const nlohmann::json::exception& e) {
        user_error_in(sp, std::string("unreadable checkpoint state: ") + e.what());
    }
    const auto sequences = static_cast<std::int64_t>(data_->train_seqs().size());
    if (step < 1 || epoch < 0 || position < 0 || position > sequences)
        user_error_in(sp, cat("holds step ", step, ", epoch ", epoch, ", position ", position, " of ", sequences,
                              " training sequences: not a state a run reaches"),
                      "resume from an earlier checkpoint, or start over with --force");
    if (step > o_.steps)
        user_error_in(sp, cat("is at step ", step, ", past --steps ", o_.steps),
                      cat("pass --steps ", step, " or more to continue the run"));
    if (ctx_.verify_inputs && dist_->root()) checkpoint_verify_files(dir);
    params_load((fs::path(dir) / "model.safetensors").string(), model_->params(), model_->layout(), config_);
    opt_->load((fs::path(dir) / "optimizer.safetensors").string());
    // (after the files' checks: a refused resume says only why; not for a run already complete, which continues nothing)
    if (rule.empty() && !o_.no_retrieval) {
        continuation_from_step_ = step;
        if (step < o_.steps)
            log_info("resume: " + unrecorded_continuation_note(sp, "this run", static_cast<int>(config_.chunk_size)));
    }
    if (step < o_.steps)
        note_changed_schedule(st, step, {{"steps", "--steps", double(o_.steps)}, {"lr", "--lr", o_.lr},
                                         {"min_lr_ratio", "--min-lr-ratio", o_.min_lr_ratio},
                                         {"warmup", "--warmup", double(o_.warmup)},
                                         {"weight_decay", "--weight-decay", o_.weight_decay},
                                         {"beta1", "--beta1", o_.beta1}, {"beta2", "--beta2", o_.beta2},
                                         {"eps", "--eps", o_.eps}, {"clip", "--clip", o_.clip}});
    cursor_.epoch = epoch;
    cursor_.pos = position;
    return step;
}

}  // namespace retro::train_impl
